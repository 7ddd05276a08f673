import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findRocketMQ } from '../support/brokers.js';
import { buildPackage } from '../support/built-package.js';

const broker = await findRocketMQ();

/**
 * A process that consumes through an HTTP CONNECT proxy, has its connections cut while a message is
 * in hand, closes its transports and the proxy, and then has nothing left to do: it must exit by
 * itself. Prints `closed` once everything was closed.
 */
const CHILD = (dir: string): string => `
import { ROCKETMQ_RUN_TRANSPORT as run } from ${JSON.stringify(join(dir, 'cli/brokers/rocketmq-run.js'))};
import { ConnectProxy } from ${JSON.stringify(join(dir, 'testing/connect-proxy.js'))};
const [url, namespace] = process.argv.slice(2);
const proxy = await ConnectProxy.start();
const producer = await run.open({ url, namespace });
const consumer = await run.open({ url: url + '?grpcProxy=' + encodeURIComponent(proxy.url), namespace });
let got;
const delivered = new Promise((resolve) => (got = resolve));
const subscription = await consumer.subscribe('g', ['t'], {
  async process(envelope) {
    got();
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { kind: 'executed', action: 'ack', mode: 'leased', group: 'g', key: null, topic: envelope.topic,
      brokerId: envelope.brokerId, deliveryCount: envelope.deliveryCount, elapsedMs: 0 };
  },
}, { visibility: '5s' });
await producer.publish({ topic: 't', key: 'k', body: { n: 1 } });
await delivered;
if (process.argv[4] === 'unreachable') await proxy.close();
else proxy.drop();
await new Promise((resolve) => setTimeout(resolve, 500));
await subscription.close();
await consumer.close();
await producer.close();
await proxy.close();
await run.cleanup({ url, namespace }, ['g']);
console.log('closed');
`;

describe.skipIf(!broker.available)('RocketMQTransport.close() against a real broker', () => {
  const dir = mkdtempSync(join(tmpdir(), 'oncemq-rocketmq-close-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const closes = async (how: 'cut' | 'unreachable'): Promise<void> => {
    const file = join(dir, 'child.mjs');
    writeFileSync(file, CHILD(buildPackage().dir));
    const namespace = `oncemq-close-${Math.random().toString(16).slice(2, 10)}`;
    const child = spawn(process.execPath, [file, broker.url, namespace, how], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    let closedAt: number | undefined;
    const exit = await new Promise<{ code: number | null; afterCloseMs: number | undefined }>((resolve) => {
      const watch = setInterval(() => {
        if (closedAt === undefined && stdout.includes('closed')) closedAt = Date.now();
        // closed, yet still running 15 s later: something keeps the event loop alive
        if (closedAt !== undefined && Date.now() - closedAt > 15_000) child.kill('SIGKILL');
      }, 50);
      child.once('close', (code) => {
        clearInterval(watch);
        if (closedAt === undefined && stdout.includes('closed')) closedAt = Date.now();
        resolve({ code, afterCloseMs: closedAt === undefined ? undefined : Date.now() - closedAt });
      });
    });
    expect(stdout, stderr.slice(-2000)).toContain('closed');
    expect(exit.code, 'the process did not exit by itself after closing').toBe(0);
    expect(exit.afterCloseMs).toBeLessThan(15_000);
  };

  it('leaves no gRPC channel or timer behind: a process whose connections were cut exits once it closed its transports', async () => {
    await closes('cut');
  }, 90_000);

  it('leaves none behind when the proxy is gone at close (the client cannot say goodbye): the process still exits', async () => {
    await closes('unreachable');
  }, 90_000);
});
