import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  brokersCommand,
  brokerStatus,
  createRocketMQGroups,
  createRocketMQTopics,
  findKafka,
  findRocketMQ,
  KAFKA_SERVICE,
  ROCKETMQ_SERVICE,
  type BrokerStatus,
} from '../support/brokers.js';

const run = promisify(execFile);

const byName = (statuses: readonly BrokerStatus[], name: string): BrokerStatus | undefined =>
  statuses.find((status) => status.name === name);

const kafka = await findKafka();
const rocketmq = await findRocketMQ();
/** Whether the suites use the brokers `npm run brokers` runs here (no URL variable points elsewhere). */
const local =
  process.env[KAFKA_SERVICE.variable] === undefined && process.env[ROCKETMQ_SERVICE.variable] === undefined;

const SLOW = 120_000; // the RocketMQ admin tool is a JVM start per call
/** The fetched RocketMQ jars, whose admin tool checks what the cluster says. */
const rocketmqJars = byName(await brokerStatus(), 'rocketmq');
const hasAdminTool = rocketmqJars?.fetched === true;

/** One ApiVersions v0 request (request header v1) on a raw socket: each API key with its version range. */
function apiVersions(bootstrap: string): Promise<Map<number, { min: number; max: number }>> {
  const [host = '', port = ''] = bootstrap.split(':');
  const clientId = Buffer.from('oncemq-test');
  const request = Buffer.alloc(14 + clientId.length);
  request.writeInt32BE(10 + clientId.length, 0);
  request.writeInt16BE(18, 4); // ApiVersions
  request.writeInt16BE(0, 6); // v0
  request.writeInt32BE(7, 8); // correlation id
  request.writeInt16BE(clientId.length, 12);
  clientId.copy(request, 14);
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port: Number(port) }, () => socket.write(request));
    let answer = Buffer.alloc(0);
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      answer = Buffer.concat([answer, chunk]);
      if (answer.length < 4 || answer.length < 4 + answer.readInt32BE(0)) return;
      socket.destroy();
      if (answer.readInt32BE(4) !== 7 || answer.readInt16BE(8) !== 0) {
        reject(new Error(`unexpected ApiVersions answer ${answer.toString('hex')}`));
        return;
      }
      const apis = new Map<number, { min: number; max: number }>();
      for (let i = 0, at = 14; i < answer.readInt32BE(10); i++, at += 6) {
        apis.set(answer.readInt16BE(at), {
          min: answer.readInt16BE(at + 2),
          max: answer.readInt16BE(at + 4),
        });
      }
      resolve(apis);
    });
  });
}

/** RocketMQ's own admin tool (mqadmin), from the fetched jars. */
async function mqadmin(lib: string, args: readonly string[]): Promise<string> {
  const { stdout } = await run('java', [
    '-Xmx128m',
    `-Duser.home=${join(tmpdir(), 'oncemq-mqadmin')}`, // its logs
    '-cp',
    join(lib, '*'),
    'org.apache.rocketmq.tools.command.MQAdminStartup',
    ...args,
    '-n',
    rocketmq.nameServer,
  ]);
  return stdout;
}

describe.skipIf(!local || !kafka.available || !rocketmq.available)('npm run brokers (local brokers)', () => {
  it('status reports Kafka 4 and RocketMQ 5 running and ready, and exits 0', async () => {
    const status = await brokersCommand(['status']);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/^kafka 4\.\d+\.\d+: running and ready on 127\.0\.0\.1:9092/m);
    expect(status.stdout).toMatch(
      /^rocketmq 5\.\d+\.\d+: running and ready on name server 127\.0\.0\.1:9876/m,
    );
  });

  it('start is a no-op while they run: the same processes keep running', async () => {
    const before = await brokerStatus();
    const running = ['kafka', 'rocketmq', 'elasticmq'].filter((name) => byName(before, name)?.running);
    expect(running).toEqual(expect.arrayContaining(['kafka', 'rocketmq']));
    const started = await brokersCommand(['start']);
    expect(started.code).toBe(0);
    for (const name of running)
      expect(started.stdout).toMatch(new RegExp(`^brokers: ${name} \\S+ already runs`, 'm'));
    expect(started.stdout.match(/already runs/g)).toHaveLength(running.length);
    const after = await brokerStatus();
    for (const name of running) {
      expect(byName(after, name)?.processes).toEqual(byName(before, name)?.processes);
      expect(byName(after, name)?.processes.every((process) => process.pid !== null)).toBe(true);
    }
  });
});

describe.skipIf(!kafka.available)('Kafka broker', () => {
  it('answers ApiVersions on its bootstrap address without the versions Kafka 4 removed (KIP-896)', async () => {
    const apis = await apiVersions(kafka.bootstrap);
    // Removed in 4.0: Fetch v0-v3, OffsetCommit v0-v1, CreateTopics v0-v1 (Produce and Metadata keep v0).
    expect(apis.get(1)?.min).toBeGreaterThanOrEqual(4);
    expect(apis.get(8)?.min).toBeGreaterThanOrEqual(2);
    expect(apis.get(19)?.min).toBeGreaterThanOrEqual(2);
    expect(apis.get(3)?.max).toBeGreaterThanOrEqual(12);
    expect(apis.has(22)).toBe(true); // InitProducerId: the idempotent producer
  });
});

describe.skipIf(!rocketmq.available)('RocketMQ broker', () => {
  it.skipIf(!hasAdminTool)(
    'the admin tool lists broker-a of DefaultCluster on the loopback address',
    async () => {
      const clusters = await mqadmin(rocketmqJars?.lib ?? '', ['clusterList']);
      expect(clusters).toMatch(/DefaultCluster\s+broker-a\s+0\s+127\.0\.0\.1:10911/);
    },
    SLOW,
  );

  it.skipIf(!hasAdminTool)(
    'a topic and an orderly group made by the command are what the admin tool reads back',
    async () => {
      const topic = `oncemq-test-${randomUUID().slice(0, 8)}`;
      const group = `${topic}-group`;
      await createRocketMQTopics([topic], 'FIFO', 4);
      await createRocketMQGroups([group], { orderly: true, retries: 3 });
      const route = await mqadmin(rocketmqJars?.lib ?? '', ['topicRoute', '-t', topic]);
      expect(route).toContain('"brokerName":"broker-a"');
      expect(route).toContain('"writeQueueNums":4');
      const config = await mqadmin(rocketmqJars?.lib ?? '', ['getConsumerConfig', '-g', group]);
      expect(config).toMatch(/consumeMessageOrderly\s+=\s+true/);
      expect(config).toMatch(/retryMaxTimes\s+=\s+3/);
    },
    SLOW,
  );
});
