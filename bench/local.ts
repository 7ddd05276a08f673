/**
 * Local broker, end to end: publish → consume → claim + business write → ack, faults off, beside
 * the same claim + write done by hand on SQLite without any broker (`raw`). Both databases use
 * `synchronous = NORMAL` in WAL mode (durable across a process crash), so the ratio is fair.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createPipeline } from '../src/consumer/pipeline.js';
import { SqliteLedger } from '../src/ledger/sqlite/sqlite-ledger.js';
import { LocalBroker } from '../src/transport/local/local-transport.js';
import type { LocalSubscription } from '../src/transport/local/local-subscription.js';
import { summarize, type BenchResult, type Suite } from './harness.js';

const USERS = 1000;

function openApp(path: string): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
  db.exec('CREATE TABLE grants (event_id TEXT NOT NULL, user_id TEXT NOT NULL, points INTEGER NOT NULL)');
  const insert = db.prepare('INSERT INTO points VALUES (?, 0)');
  db.transaction(() => {
    for (let user = 0; user < USERS; user++) insert.run(`user-${user}`);
  })();
  return db;
}

/** The same claim (a unique row per key) and business write, by hand, one transaction per message. */
function raw(dir: string, seconds: number): BenchResult {
  const db = openApp(join(dir, 'raw.db'));
  db.exec(
    'CREATE TABLE inbox (consumer_group TEXT NOT NULL, msg_key TEXT NOT NULL, status TEXT NOT NULL, broker_id TEXT, updated_at INTEGER NOT NULL, PRIMARY KEY (consumer_group, msg_key))',
  );
  const claim = db.prepare(
    "INSERT INTO inbox VALUES ('points', ?, 'SUCCESS', ?, ?) ON CONFLICT (consumer_group, msg_key) DO NOTHING",
  );
  const add = db.prepare('UPDATE points SET balance = balance + 100 WHERE user_id = ?');
  const grant = db.prepare('INSERT INTO grants VALUES (?, ?, 100)');
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const latencies: number[] = [];
  const started = performance.now();
  const until = started + seconds * 1000;
  let count = 0;
  while (performance.now() < until) {
    const t = performance.now();
    const key = `evt-${count}`;
    const user = `user-${count % USERS}`;
    begin.run();
    if (claim.run(key, `b-${count}`, Date.now()).changes === 1) {
      add.run(user);
      grant.run(key, user);
    }
    commit.run();
    latencies.push(performance.now() - t);
    count++;
  }
  const elapsed = performance.now() - started;
  db.close();
  return summarize('raw', 1, count, elapsed, latencies);
}

/** Publishes while `consumers` members of one group drain the topic through the pipeline. */
async function endToEnd(dir: string, seconds: number, consumers: number): Promise<BenchResult> {
  const db = openApp(join(dir, `app-${consumers}.db`));
  const ledger = new SqliteLedger({ database: db });
  await ledger.init();
  const add = db.prepare('UPDATE points SET balance = balance + 100 WHERE user_id = ?');
  const grant = db.prepare('INSERT INTO grants VALUES (?, ?, 100)');
  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  let done = 0;
  const pipeline = createPipeline<Database.Database, { eventId: string; userId: string }>({
    ledger,
    group: 'points',
    handler: (event) => {
      add.run(event.userId);
      grant.run(event.eventId, event.userId);
    },
    onOutcome: (outcome) => {
      const at = outcome.key === null ? undefined : sentAt.get(outcome.key);
      if (at !== undefined) latencies.push(performance.now() - at);
      done++;
    },
  });
  const broker = new LocalBroker({ path: join(dir, `broker-${consumers}.db`), pollInterval: '1ms' });
  await broker.init();
  const subscriptions: LocalSubscription[] = [];
  for (let i = 0; i < consumers; i++)
    subscriptions.push(await broker.subscribe('points', ['payments'], pipeline));
  const started = performance.now();
  const until = started + seconds * 1000;
  let published = 0;
  while (performance.now() < until) {
    if (published - done > 2000) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      continue;
    }
    for (let i = 0; i < 50; i++, published++) {
      const key = `evt-${published}`;
      sentAt.set(key, performance.now());
      await broker.publish({
        topic: 'payments',
        key,
        body: { eventId: key, userId: `user-${published % USERS}` },
      });
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  const elapsed = performance.now() - started;
  const count = done;
  await Promise.all(subscriptions.map((subscription) => subscription.close()));
  await broker.close();
  await ledger.close();
  db.close();
  return summarize('oncemq:transactional', consumers, count, elapsed, latencies);
}

export const suite: Suite = {
  name: 'local',
  description: 'end to end through the local broker vs the raw SQLite claim + write',
  async run({ seconds }) {
    const dir = mkdtempSync(join(tmpdir(), 'oncemq-bench-local-'));
    try {
      return [raw(dir, seconds), await endToEnd(dir, seconds, 1), await endToEnd(dir, seconds, 4)];
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
