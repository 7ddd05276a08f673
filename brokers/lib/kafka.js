// Kafka 4.x as one combined KRaft node (broker + controller) on 127.0.0.1:9092 (controller 9093).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { clusterMetadata } from './kafka-protocol.js';
import { runJava, startJava, waitUntilReady } from './java-process.js';

/** A fixed cluster id (22 characters of base64url, 16 bytes): the storage is formatted anew each start. */
const CLUSTER_ID = 'b25jZW1xLWthZmthLTAwMQ';
const HOST = '127.0.0.1';
const PORT = 9092;

const JVM = ['-Xms256m', '-Xmx512m', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-Djava.awt.headless=true'];

export const kafka = {
  name: 'kafka',
  processes: [{ id: 'kafka', mainClass: 'kafka.Kafka' }],
  ports: [PORT, 9093],
  where: `${HOST}:${PORT} (controller 9093)`,

  /** Ready once the broker answers Metadata and advertises itself. */
  async ready() {
    const metadata = await clusterMetadata(HOST, PORT);
    return metadata.brokers.some((broker) => broker.host === HOST && broker.port === PORT);
  },

  /** Formats the storage in the scratch directory (fresh), then starts the node and waits until ready. */
  async start(layout) {
    const jvm = [...JVM, `-Dlog4j2.configurationFile=${layout.source('log4j2.properties')}`];
    const properties = join(layout.run, 'server.properties');
    writeFileSync(
      properties,
      `${readFileSync(layout.source('server.properties'), 'utf8')}log.dirs=${join(layout.data, 'kafka-logs')}\n`,
    );
    runJava({
      jvm,
      classPath: layout.classPath,
      mainClass: 'kafka.tools.StorageTool',
      args: ['format', '--cluster-id', CLUSTER_ID, '--config', properties, '--ignore-formatted'],
      cwd: layout.run,
    });
    const pid = startJava({
      jvm,
      classPath: layout.classPath,
      mainClass: 'kafka.Kafka',
      args: [properties],
      logFile: layout.logFile('kafka'),
      pidFile: layout.pidFile('kafka'),
      cwd: layout.run,
    });
    await waitUntilReady({
      what: 'Kafka',
      pid,
      logFiles: [layout.logFile('kafka')],
      ready: () => this.ready(),
    });
  },
};
