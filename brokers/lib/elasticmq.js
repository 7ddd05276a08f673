// ElasticMQ, an SQS-compatible server, on 127.0.0.1:9324: queues in memory, SQS's limits enforced.
import { startJava, waitUntilReady } from './java-process.js';

const HOST = '127.0.0.1';
const PORT = 9324;

const JVM = [
  '-Xms64m',
  '-Xmx256m',
  '-XX:+UseSerialGC',
  '-XX:TieredStopAtLevel=1',
  '-Djava.awt.headless=true',
];

export const elasticmq = {
  name: 'elasticmq',
  processes: [{ id: 'elasticmq', mainClass: 'org.elasticmq.server.Main' }],
  ports: [PORT],
  where: `http://${HOST}:${PORT} (SQS API)`,

  /** Ready once the SQS API answers `ListQueues`. */
  async ready() {
    const response = await globalThis.fetch(`http://${HOST}:${PORT}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'Action=ListQueues',
      signal: globalThis.AbortSignal.timeout(2000),
    });
    await response.arrayBuffer();
    return response.status === 200;
  },

  async start(layout) {
    const pid = startJava({
      jvm: [...JVM, `-Dconfig.file=${layout.source('elasticmq.conf')}`],
      classPath: layout.classPath,
      mainClass: 'org.elasticmq.server.Main',
      args: [],
      logFile: layout.logFile('elasticmq'),
      pidFile: layout.pidFile('elasticmq'),
      cwd: layout.run,
    });
    await waitUntilReady({
      what: 'ElasticMQ',
      pid,
      logFiles: [layout.logFile('elasticmq')],
      ready: () => this.ready(),
    });
  },
};
