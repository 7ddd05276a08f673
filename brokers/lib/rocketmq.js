// RocketMQ 5.x: the name server on 127.0.0.1:9876, and the proxy (gRPC 8081, remoting 8080) running the
// broker (10911, fast port 10909, HA 10912) in its own process — what `mqbroker --enable-proxy` starts.
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { portOpen, startJava, waitUntilReady } from './java-process.js';
import { expectSuccess, remotingRequest, RequestCode } from './rocketmq-remoting.js';

const HOST = '127.0.0.1';
const NAMESRV_PORT = 9876;
const PROXY_GRPC_PORT = 8081;
const PROXY_REMOTING_PORT = 8080;
const BROKER_ADDRESS = `${HOST}:10911`;

/** What RocketMQ's own start scripts open on Java 9+ (distribution/bin/runserver.sh, runbroker.sh). */
const OPENS = [
  '--add-opens=java.base/java.lang=ALL-UNNAMED',
  '--add-opens=java.base/java.nio=ALL-UNNAMED',
  '--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED',
  '--add-opens=java.base/java.util=ALL-UNNAMED',
  '--add-exports=java.base/sun.nio.ch=ALL-UNNAMED',
];
const NAMESRV_JVM = ['-Xms128m', '-Xmx256m', '-XX:+UseG1GC', ...OPENS];
const PROXY_JVM = ['-Xms256m', '-Xmx768m', '-XX:MaxDirectMemorySize=512m', '-XX:+UseG1GC', ...OPENS];

/** The cluster as the name server knows it (fastjson text). */
async function clusterInfo() {
  const answer = await remotingRequest({
    host: HOST,
    port: NAMESRV_PORT,
    code: RequestCode.GET_BROKER_CLUSTER_INFO,
  });
  return expectSuccess('GET_BROKER_CLUSTER_INFO', answer).body;
}

export const rocketmq = {
  name: 'rocketmq',
  processes: [
    { id: 'namesrv', mainClass: 'org.apache.rocketmq.namesrv.NamesrvStartup' },
    { id: 'proxy', mainClass: 'org.apache.rocketmq.proxy.ProxyStartup' },
  ],
  ports: [NAMESRV_PORT, PROXY_REMOTING_PORT, PROXY_GRPC_PORT, 10909, 10911, 10912],
  where: `name server ${HOST}:${NAMESRV_PORT}, proxy ${HOST}:${PROXY_GRPC_PORT} (gRPC)`,

  /**
   * Ready once the name server lists broker-a, the proxy routes the broker's default topic, and the
   * gRPC port accepts connections.
   */
  async ready() {
    if (!(await clusterInfo()).includes(BROKER_ADDRESS)) return false;
    const route = await remotingRequest({
      host: HOST,
      port: PROXY_REMOTING_PORT,
      code: RequestCode.GET_ROUTEINFO_BY_TOPIC,
      extFields: { topic: 'TBW102' },
    });
    return route.code === 0 && (await portOpen(PROXY_GRPC_PORT));
  },

  async start(layout) {
    // ROCKETMQ_HOME holds the configuration and user.home the logs (logs/rocketmqlogs/): both are this
    // folder, made anew at each start and kept after a stop for its logs. The store is scratch data.
    const home = join(layout.run, 'home');
    rmSync(home, { recursive: true, force: true });
    const conf = join(home, 'conf');
    mkdirSync(conf, { recursive: true });
    copyFileSync(layout.source('namesrv.conf'), join(conf, 'namesrv.conf'));
    copyFileSync(layout.source('rmq-proxy.json'), join(conf, 'rmq-proxy.json'));
    writeFileSync(
      join(conf, 'broker.conf'),
      `${readFileSync(layout.source('broker.conf'), 'utf8')}storePathRootDir=${join(layout.data, 'store')}\n`,
    );
    const logs = join(home, 'logs', 'rocketmqlogs');
    const system = [`-Drocketmq.home.dir=${home}`, `-Duser.home=${home}`];
    const common = { classPath: layout.classPath, cwd: layout.run };

    const namesrv = startJava({
      ...common,
      jvm: [...NAMESRV_JVM, ...system],
      mainClass: this.processes[0].mainClass,
      args: ['-c', join(conf, 'namesrv.conf')],
      logFile: layout.logFile('namesrv'),
      pidFile: layout.pidFile('namesrv'),
    });
    await waitUntilReady({
      what: 'the RocketMQ name server',
      pid: namesrv,
      logFiles: [layout.logFile('namesrv'), join(logs, 'namesrv.log')],
      ready: async () => (await clusterInfo()).length > 0,
    });

    const proxy = startJava({
      ...common,
      jvm: [...PROXY_JVM, ...system],
      mainClass: this.processes[1].mainClass,
      args: [
        '-pm',
        'local',
        '-n',
        `${HOST}:${NAMESRV_PORT}`,
        '-pc',
        join(conf, 'rmq-proxy.json'),
        '-bc',
        join(conf, 'broker.conf'),
      ],
      logFile: layout.logFile('proxy'),
      pidFile: layout.pidFile('proxy'),
    });
    await waitUntilReady({
      what: 'the RocketMQ proxy and broker',
      pid: proxy,
      logFiles: [layout.logFile('proxy'), join(logs, 'proxy.log'), join(logs, 'broker.log')],
      ready: () => this.ready(),
    });
  },
};
