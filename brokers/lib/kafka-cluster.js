// Three Kafka 4 nodes in KRaft (each broker and controller, the controllers a quorum of three) from the jars
// `npm run brokers -- fetch kafka` copied: clients on 127.0.0.1:9201-9203, controllers on 9301-9303;
// topics get 3 replicas and min.insync.replicas 2. The single-node Kafka (9092) is not touched.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { clusterMetadata } from './kafka-protocol.js';
import { brokerLayout } from './layout.js';
import { BrokersError, requireJava, runJava } from './java-process.js';
import { fetched } from './maven.js';

const HOST = '127.0.0.1';
const NODES = [1, 2, 3];
const clientPort = (n) => 9200 + n;
const controllerPort = (n) => 9300 + n;
/** Another fixed cluster id than the single node's (22 characters of base64url). */
const CLUSTER_ID = 'b25jZW1xLWNsdXN0ZXItMw';

const JVM = ['-Xms128m', '-Xmx384m', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-Djava.awt.headless=true'];

function properties(n, dir) {
  const voters = NODES.map((other) => `${other}@${HOST}:${controllerPort(other)}`).join(',');
  return [
    'process.roles=broker,controller',
    `node.id=${n}`,
    `controller.quorum.voters=${voters}`,
    `listeners=PLAINTEXT://${HOST}:${clientPort(n)},CONTROLLER://${HOST}:${controllerPort(n)}`,
    `advertised.listeners=PLAINTEXT://${HOST}:${clientPort(n)}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    'listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
    `log.dirs=${join(dir, 'kafka-logs')}`,
    // every topic three replicas; a write acknowledged by all (acks=all) is on at least two of them
    'default.replication.factor=3',
    'min.insync.replicas=2',
    'offsets.topic.replication.factor=3',
    'offsets.topic.num.partitions=3',
    'transaction.state.log.replication.factor=3',
    'transaction.state.log.min.isr=2',
    'transaction.state.log.num.partitions=3',
    'share.coordinator.state.topic.replication.factor=3',
    'share.coordinator.state.topic.min.isr=2',
    // no leader moved back by the broker on its own while a run counts its failures
    'auto.leader.rebalance.enable=false',
    'unclean.leader.election.enable=false',
    'group.initial.rebalance.delay.ms=0',
    '',
  ].join('\n');
}

export const kafkaCluster = {
  name: 'kafka',

  describe(run) {
    const layout = brokerLayout('kafka');
    if (!fetched(layout))
      throw new BrokersError('Kafka is not fetched: run npm run brokers -- fetch kafka first');
    const jvm = [...JVM, `-Dlog4j2.configurationFile=${layout.source('log4j2.properties')}`];
    const nodes = NODES.map((n) => {
      const dir = join(run, `k${n}`);
      const config = join(dir, 'server.properties');
      return {
        id: `k${n}`,
        name: String(n),
        url: `kafka://${HOST}:${clientPort(n)}`,
        command: 'java',
        args: [...jvm, '-cp', layout.classPath, 'kafka.Kafka', config],
        env: {},
        cwd: dir,
        config,
        marker: config,
        logFile: join(dir, 'kafka.log'),
        pidFile: join(dir, 'kafka.pid'),
      };
    });
    return {
      broker: 'kafka',
      urls: nodes.map((node) => node.url),
      ports: NODES.flatMap((n) => [clientPort(n), controllerPort(n)]),
      jvm,
      classPath: layout.classPath,
      nodes,
    };
  },

  /** Writes each node's properties and formats its storage (fresh) with the cluster's id. */
  prepare(state) {
    requireJava();
    for (const [index, node] of state.nodes.entries()) {
      mkdirSync(node.cwd, { recursive: true });
      writeFileSync(node.config, properties(NODES[index], node.cwd));
      runJava({
        jvm: state.jvm,
        classPath: state.classPath,
        mainClass: 'kafka.tools.StorageTool',
        args: ['format', '--cluster-id', CLUSTER_ID, '--config', node.config, '--ignore-formatted'],
        cwd: node.cwd,
      });
    }
  },

  /** Every node answers Metadata and lists all three brokers. */
  async ready() {
    for (const n of NODES) {
      const metadata = await clusterMetadata(HOST, clientPort(n));
      if (metadata.brokers.length !== NODES.length) return false;
    }
    return true;
  },
};
