import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, createRelay, RetryPolicy, type Pipeline, type Relay } from 'oncemq';
import { buildPackage } from '../support/built-package.js';
import { waitUntil } from '../support/local-points.js';
import { CountingTransport, crashBeforePublish, OUTBOX_DATABASES, type OutboxDb } from '../support/outbox.js';
import { findRabbit, rabbitWorld, type RabbitWorld } from '../support/rabbitmq.js';
import type { Service } from '../support/services.js';

/**
 * A relay of its own process: opens the outbox named on its command line and publishes to RabbitMQ.
 * Its first `stallAfter` publishes go out; the later ones never start, so the round in progress is
 * never marked. Once the `stallAfter` confirms are in it prints `published N`, to be killed there:
 * between publish and mark, with rows of the same round not yet published.
 */
const RELAY_PROCESS = `
import { createOutbox, createRelay } from './index.js';
import { RabbitTransport } from './rabbitmq.js';

const [kind, url, table, schema, rabbitUrl, prefix, stallAfterText] = process.argv.slice(2);
const stallAfter = Number(stallAfterText);
let database;
let dialect;
if (kind === 'sqlite') {
  const Database = (await import('better-sqlite3')).default;
  database = new Database(url);
  database.pragma('busy_timeout = 5000');
  dialect = (await import('./sqlite.js')).sqliteDialect;
} else if (kind === 'mysql') {
  const mysql = await import('mysql2/promise');
  database = mysql.createPool({ uri: url, connectionLimit: 2 });
  dialect = (await import('./mysql.js')).mysqlDialect;
} else {
  const pg = (await import('pg')).default;
  database = new pg.Pool({ connectionString: url, max: 2 });
  dialect = (await import('./postgres.js')).postgresDialect;
}
const outbox = createOutbox({ dialect, table, ...(schema === '' ? {} : { schema }) });
const rabbit = new RabbitTransport({ url: rabbitUrl, prefix, exchange: prefix });
await rabbit.init();
let calls = 0;
let confirmed = 0;
const transport = {
  name: 'rabbitmq',
  async publish(message) {
    if (++calls > stallAfter) await new Promise(() => undefined);
    const receipt = await rabbit.publish(message);
    if (++confirmed === stallAfter) process.stdout.write('published ' + confirmed + '\\n');
    return receipt;
  },
};
const relay = createRelay({ outbox, transport, database, batchSize: 20, pollInterval: '20ms', lease: '500ms', listen: false });
await relay.start();
`;

/** Starts the relay process and resolves once it printed `published N`, with the process still running. */
function stalledRelay(
  script: string,
  args: readonly string[],
): Promise<{ child: ChildProcess; exited: Promise<NodeJS.Signals | null> }> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('exit', (_code, signal) => resolve(signal)),
  );
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (/published \d+\n/.test(stdout)) resolve({ child, exited });
    });
    void exited.then(() => reject(new Error(`the relay process ended before publishing: ${stderr}`)));
  });
}

const rabbit: Service = await findRabbit();
const databases = OUTBOX_DATABASES.filter((factory) => factory.name !== 'postgres');

describe.each(databases)('the outbox relay from $name to RabbitMQ', (factory) => {
  let script: string;
  let db: OutboxDb<unknown> | undefined;
  let world: RabbitWorld | undefined;
  const relays: Relay<unknown>[] = [];
  const children: ChildProcess[] = [];

  beforeAll(() => {
    const build = buildPackage();
    script = join(build.dir, `relay-process-${process.pid}.mjs`);
    writeFileSync(script, RELAY_PROCESS);
  });

  beforeEach(async () => {
    if (!rabbit.available) return;
    db = await factory.open();
    world = await rabbitWorld(rabbit.url);
  });

  afterEach(async () => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
    await Promise.all(relays.splice(0).map((relay) => relay.stop()));
    await world?.cleanup();
    await db?.close();
  });

  const relay = (
    transport: CountingTransport | RabbitWorld['transport'],
    extra: Record<string, unknown> = {},
  ) => {
    const created = createRelay({
      outbox: (db as OutboxDb<unknown>).outbox,
      transport,
      database: (db as OutboxDb<unknown>).relayDatabase(),
      pollInterval: '20ms',
      minBackoff: '50ms',
      maxBackoff: '400ms',
      publishTimeout: '5s',
      listen: false,
      ...extra,
    });
    relays.push(created);
    return created;
  };

  /** A consumer group applying one effect per key in the ledger's transaction. */
  async function consume(outboxDb: OutboxDb<unknown>): Promise<Pipeline> {
    const pipeline = createPipeline({
      ledger: outboxDb.ledger,
      group: 'effects',
      retry: new RetryPolicy({ delays: ['50ms', '50ms'] }),
      handler: (_message: unknown, hctx) => outboxDb.applyEffect(hctx.tx, hctx.key),
    });
    await (world as RabbitWorld).transport.subscribe('effects', ['events'], pipeline, { concurrency: 8 });
    return pipeline;
  }

  async function addMessages(outboxDb: OutboxDb<unknown>, count: number, prefix: string): Promise<string[]> {
    const keys = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
    for (let i = 0; i < count; i += 10) {
      await outboxDb.inTx(async (tx) => {
        for (const key of keys.slice(i, i + 10)) {
          await outboxDb.outbox.add(tx, { topic: 'events', key, body: { key } });
        }
      });
    }
    return keys;
  }

  async function expectEveryKeyOnce(outboxDb: OutboxDb<unknown>, keys: readonly string[]): Promise<void> {
    await waitUntil(async () => (await outboxDb.pending()) === 0, 'every row sent', 30_000);
    await waitUntil(async () => (await outboxDb.effects()).size === keys.length, 'an effect per key', 30_000);
    const effects = await outboxDb.effects();
    expect([...effects.keys()].sort()).toEqual([...keys].sort());
    expect([...effects.values()].every((n) => n === 1)).toBe(true);
  }

  it('two relays share the rows without sending any twice; every row takes effect once', async (ctx) => {
    if (db === undefined || world === undefined) return ctx.skip();
    const outboxDb = db;
    await consume(outboxDb);
    const keys = await addMessages(outboxDb, 120, 'two');
    const counting = new CountingTransport(world.transport);
    const a = relay(counting, { batchSize: 10 });
    const b = relay(counting, { batchSize: 10 });
    await Promise.all([a.start(), b.start()]);
    await expectEveryKeyOnce(outboxDb, keys);
    // A relay counts a batch once its mark-sent commit has answered, which another connection can see first.
    const counted = () => a.metrics().published + b.metrics().published;
    await waitUntil(() => counted() >= keys.length, 'both relays to count what they marked');
    expect(counting.doubles()).toEqual([]);
    expect(counting.sent.size).toBe(keys.length);
    expect(a.metrics().published).toBeGreaterThan(0);
    expect(b.metrics().published).toBeGreaterThan(0);
    expect(counted()).toBe(keys.length);
  });

  it('a relay dying between publish and mark loses nothing; the consumer absorbs the copies', async (ctx) => {
    if (db === undefined || world === undefined) return ctx.skip();
    const outboxDb = db;
    const pipeline = await consume(outboxDb);
    const keys = await addMessages(outboxDb, 60, 'crash');
    const crashing = relay(world.transport, {
      batchSize: 20,
      lease: '300ms',
      faults: crashBeforePublish(15),
    });
    await crashing.start();
    await waitUntil(() => crashing.crashed, 'the relay to crash');
    const survivor = relay(world.transport, { batchSize: 20, lease: '300ms' });
    await survivor.start();
    await expectEveryKeyOnce(outboxDb, keys);
    await waitUntil(() => pipeline.metrics().outcomes.duplicate > 0, 'a re-published copy absorbed');
    expect(survivor.metrics().republished).toBeGreaterThan(0);
  });

  it('a relay process killed with SIGKILL between publish and mark loses nothing; the ledger absorbs the copies', async (ctx) => {
    if (db === undefined || world === undefined) return ctx.skip();
    const outboxDb = db;
    const pipeline = await consume(outboxDb);
    const keys = await addMessages(outboxDb, 60, 'kill');
    const { url, table, schema } = outboxDb.location;
    // Round one (20 rows) is published and marked; of round two 5 rows are published, none marked.
    const { child, exited } = await stalledRelay(script, [
      outboxDb.name,
      url,
      table,
      schema ?? '',
      rabbit.url,
      world.prefix,
      '25',
    ]);
    children.push(child);
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    // The killed relay's published rows are still pending: no one marked them.
    expect(await outboxDb.pending()).toBeGreaterThanOrEqual(40);
    await waitUntil(async () => (await outboxDb.effects()).size >= 25, 'the published rows applied', 30_000);
    const survivor = relay(world.transport, { batchSize: 20 });
    await survivor.start();
    await expectEveryKeyOnce(outboxDb, keys);
    expect(survivor.metrics().republished).toBeGreaterThanOrEqual(20);
    await waitUntil(
      () => pipeline.metrics().outcomes.duplicate >= 5,
      'the copies of the rows published before the kill absorbed',
      30_000,
    );
  });
});
