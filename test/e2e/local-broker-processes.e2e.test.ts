import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPackage } from '../support/built-package.js';
import { publishPayments, testBroker, waitUntil } from '../support/local-points.js';
import { scratchDir } from '../support/points.js';

/** One consumer process: the payment-to-points pipeline on a shared app database and broker file. */
const CONSUMER = `
import Database from 'better-sqlite3';
import { createPipeline } from './index.js';
import { SqliteLedger } from './sqlite.js';
import { LocalBroker } from './local.js';

const [brokerPath, appPath, name] = process.argv.slice(2);
const db = new Database(appPath);
db.pragma('journal_mode = WAL');
db.pragma('busy_timeout = 10000');
const ledger = new SqliteLedger({ database: db });
const pipeline = createPipeline({
  ledger,
  group: 'points',
  handler: (event, ctx) => {
    ctx.tx.prepare('UPDATE points SET balance = balance + 100 WHERE user_id = ?').run(event.userId);
    ctx.tx.prepare('INSERT INTO grants (event_id, member) VALUES (?, ?)').run(event.eventId, name);
  },
});
const broker = new LocalBroker({
  path: brokerPath, pollInterval: '5ms', heartbeatInterval: '50ms', sessionTimeout: '2s', commitInterval: '50ms',
});
const subscription = await broker.subscribe('points', ['payments'], pipeline, { consumerName: name });
let last = '';
const timer = setInterval(() => {
  const queues = subscription.assignment.filter((q) => q.topic === 'payments').map((q) => q.queueId).sort().join(',');
  if (queues !== last) {
    last = queues;
    process.stdout.write(JSON.stringify({ name, queues }) + '\\n');
  }
}, 10);
process.stdin.once('data', async () => {
  clearInterval(timer);
  await subscription.close();
  await broker.close();
  await ledger.close();
  db.close();
  process.stdout.write(JSON.stringify({ name, deliveries: subscription.deliveries, done: true }) + '\\n');
  process.stdin.destroy();
});
`;

let build: ReturnType<typeof buildPackage>;

beforeAll(() => {
  build = buildPackage();
  writeFileSync(join(build.dir, 'consumer.mjs'), CONSUMER);
});

afterAll(() => {
  build.remove();
});

interface Child {
  readonly process: ChildProcessWithoutNullStreams;
  readonly lines: Record<string, unknown>[];
  readonly exited: Promise<number | null>;
}

function startConsumer(brokerPath: string, appPath: string, name: string): Child {
  const child = spawn(process.execPath, [join(build.dir, 'consumer.mjs'), brokerPath, appPath, name]);
  const lines: Record<string, unknown>[] = [];
  let buffer = '';
  child.stdout.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    for (let end = buffer.indexOf('\n'); end >= 0; end = buffer.indexOf('\n')) {
      lines.push(JSON.parse(buffer.slice(0, end)) as Record<string, unknown>);
      buffer = buffer.slice(end + 1);
    }
  });
  child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { process: child, lines, exited };
}

const queuesOf = (child: Child): string | undefined =>
  child.lines.filter((line) => 'queues' in line).at(-1)?.queues as string | undefined;

describe('two processes sharing one broker file', () => {
  it('split the queues of the group and together apply each effect once', async () => {
    const scratch = scratchDir();
    const brokerPath = join(scratch.dir, 'broker.db');
    const appPath = join(scratch.dir, 'app.db');
    const app = new Database(appPath);
    app.pragma('journal_mode = WAL');
    app.pragma('busy_timeout = 10000');
    app.exec('CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
    app.exec('CREATE TABLE grants (event_id TEXT NOT NULL, member TEXT NOT NULL)');
    for (let user = 0; user < 3; user++) app.prepare('INSERT INTO points VALUES (?, 0)').run(`user-${user}`);
    const broker = testBroker(scratch.dir, { path: brokerPath });
    await broker.init();
    broker.queueCount('payments');

    const children = [startConsumer(brokerPath, appPath, 'a'), startConsumer(brokerPath, appPath, 'b')];
    await waitUntil(() => {
      const [a, b] = children.map(queuesOf);
      if (a === undefined || b === undefined || a === '' || b === '') return false;
      const all = [...a.split(','), ...b.split(',')].sort();
      return all.join(',') === '0,1,2,3';
    }, 'the two processes splitting the four queues');

    const events = 300;
    await publishPayments(broker, events);
    const grants = (): number => (app.prepare('SELECT COUNT(*) AS n FROM grants').get() as { n: number }).n;
    await waitUntil(
      async () => grants() >= events && (await broker.lag('points', ['payments'])) === 0,
      'all effects',
    );

    for (const child of children) child.process.stdin.write('stop\n');
    expect(await Promise.all(children.map((child) => child.exited))).toEqual([0, 0]);

    const perEvent = app.prepare('SELECT event_id, COUNT(*) AS n FROM grants GROUP BY event_id').all() as {
      n: number;
    }[];
    expect(perEvent).toHaveLength(events);
    expect(perEvent.every((row) => row.n === 1)).toBe(true);
    const perMember = app
      .prepare('SELECT member, COUNT(*) AS n FROM grants GROUP BY member ORDER BY member')
      .all();
    expect(perMember).toHaveLength(2);
    const total = app.prepare('SELECT SUM(balance) AS s FROM points').get() as { s: number };
    expect(total.s).toBe(events * 100);
    await broker.close();
    app.close();
    scratch.remove();
  });
});
