import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  createOutbox,
  createPipeline,
  createRelay,
  OUTBOX_ID_HEADER,
  PermanentError,
  RetryPolicy,
  type Relay,
  type Transport,
} from 'oncemq';
import type { LocalBroker, LocalSubscription } from 'oncemq/local';
import { testBroker, waitUntil } from '../support/local-points.js';
import { CountingTransport, crashBeforePublish, OUTBOX_DATABASES, type OutboxDb } from '../support/outbox.js';
import { scratchDir } from '../support/points.js';

const QUICK = { pollInterval: '10ms', minBackoff: '20ms', maxBackoff: '200ms' } as const;

describe.each(OUTBOX_DATABASES)('the outbox on $name', (factory) => {
  let db: OutboxDb<unknown> | undefined;
  let scratch: ReturnType<typeof scratchDir>;
  let broker: LocalBroker;
  const relays: Relay<unknown>[] = [];
  const subscriptions: LocalSubscription[] = [];

  beforeEach(async () => {
    db = await factory.open();
    scratch = scratchDir();
    broker = testBroker(scratch.dir);
  });

  afterEach(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.stop()));
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    await broker.close();
    await db?.close();
    scratch.remove();
  });

  const relay = (transport: Pick<Transport, 'name' | 'publish'>, extra: Record<string, unknown> = {}) => {
    const created = createRelay({
      outbox: (db as OutboxDb<unknown>).outbox,
      transport,
      database: (db as OutboxDb<unknown>).relayDatabase(),
      ...QUICK,
      ...extra,
    });
    relays.push(created);
    return created;
  };

  /** Writes `count` messages, `perTx` to a business transaction, keys `${prefix}-${i}`. */
  async function addMessages(count: number, prefix = 'm', perTx = 10): Promise<string[]> {
    const keys: string[] = [];
    const outboxDb = db as OutboxDb<unknown>;
    for (let i = 0; i < count; i += perTx) {
      await outboxDb.inTx(async (tx) => {
        for (let j = i; j < Math.min(count, i + perTx); j++) {
          const key = `${prefix}-${j}`;
          keys.push(key);
          await outboxDb.outbox.add(tx, { topic: 'events', key, body: { n: j } });
        }
      });
    }
    return keys;
  }

  it('publishes a committed message with its business key, headers and body unchanged, and marks it sent', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const outbox = db.outbox;
    const key = 'Order 42 / Paid ✓';
    const entry = await db.inTx((tx) =>
      outbox.add(tx, { topic: 'events', key, headers: { trace: 't-1' }, body: { amount: 5 } }),
    );
    expect(await db.pending()).toBe(1);
    const round = await relay(broker).runOnce();
    expect(round).toEqual({ claimed: 1, published: 1, failed: 0 });
    const [stored] = await broker.messages('events');
    expect(stored?.headers['oncemq-key']).toBe(key);
    expect(stored?.headers.trace).toBe('t-1');
    expect(stored?.headers[OUTBOX_ID_HEADER]).toBe(entry.id);
    expect(JSON.parse(Buffer.from(stored?.body ?? []).toString('utf8'))).toEqual({ amount: 5 });
    expect(await db.pending()).toBe(0);
  });

  it('sends nothing when the business transaction rolls back', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const outbox = db.outbox;
    const inTx = db.inTx.bind(db);
    await expect(
      inTx(async (tx) => {
        await outbox.add(tx, { topic: 'events', key: 'rolled-back', orderingKey: 'o-1', body: 'x' });
        throw new Error('business rule failed');
      }),
    ).rejects.toThrow('business rule failed');
    expect(await db.rows()).toBe(0);
    expect(await relay(broker).runOnce()).toEqual({ claimed: 0, published: 0, failed: 0 });
    expect(await broker.messages('events')).toHaveLength(0);
  });

  it('refuses a bad message with a PermanentError naming the field, writing nothing', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const outbox = db.outbox;
    const bad = [
      { topic: '', key: 'k', body: 'x' },
      { topic: 'events', key: '', body: 'x' },
      { topic: 'events', key: 'k', orderingKey: 'x'.repeat(256), body: 'x' },
      { topic: 'events', key: 'k', headers: { n: 1 as unknown as string }, body: 'x' },
      { topic: 'events', key: 'k', body: undefined as unknown as string },
    ];
    for (const message of bad) {
      await expect(db.inTx((tx) => outbox.add(tx, message))).rejects.toBeInstanceOf(PermanentError);
    }
    expect(await db.rows()).toBe(0);
  });

  it('refuses hostile table and schema names at start-up', (ctx) => {
    if (db === undefined) return ctx.skip();
    const ledger = db.ledger;
    expect(() => createOutbox({ ledger, table: 'out"; DROP TABLE x; --' })).toThrow(ConfigError);
    expect(() => createOutbox({ ledger, table: 'a'.repeat(41) })).toThrow(ConfigError);
    expect(() => createOutbox({ ledger, schema: 'bad schema' })).toThrow(ConfigError);
  });

  it('refuses to start a relay on an outbox whose tables were never created', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const missing = createOutbox({ ledger: db.ledger, table: 'never_migrated' });
    const r = createRelay({ outbox: missing, transport: broker, database: db.relayDatabase() });
    await expect(r.start()).rejects.toThrow(/run outbox\.migrate/);
  });

  it('two relays share the rows without sending any twice', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const keys = await addMessages(240);
    const counting = new CountingTransport(broker);
    // Relay a's publishes wait until b has published one: both take part on a machine of any speed,
    // each holding rows the other must skip.
    let bPublished: () => void = () => undefined;
    const bHasPublished = new Promise<void>((resolve) => (bPublished = resolve));
    const a = relay(
      {
        name: counting.name,
        publish: async (message) => {
          await bHasPublished;
          return counting.publish(message);
        },
      },
      { batchSize: 10 },
    );
    const b = relay(
      {
        name: counting.name,
        publish: async (message) => {
          const receipt = await counting.publish(message);
          bPublished();
          return receipt;
        },
      },
      { batchSize: 10 },
    );
    await Promise.all([a.start(), b.start()]);
    await waitUntil(async () => (await (db as OutboxDb<unknown>).pending()) === 0, 'every row sent');
    // A relay counts a batch once its mark-sent commit has answered, which another connection can see first.
    const counted = () => a.metrics().published + b.metrics().published;
    await waitUntil(() => counted() >= keys.length, 'both relays to count what they marked');
    expect(counting.doubles()).toEqual([]);
    expect([...counting.sent.keys()].sort()).toEqual([...keys].sort());
    expect(a.metrics().published).toBeGreaterThan(0);
    expect(b.metrics().published).toBeGreaterThan(0);
    expect(counted()).toBe(keys.length);
  });

  it('a relay killed between publish and mark loses nothing; the consumer absorbs the re-publish', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const outboxDb = db;
    const keys = await addMessages(60);
    const crashing = relay(broker, { batchSize: 20, lease: '300ms', faults: crashBeforePublish(15) });
    await crashing.start();
    await waitUntil(() => crashing.crashed, 'the relay to crash');
    const survivor = relay(broker, { batchSize: 20, lease: '300ms' });
    await survivor.start();
    await waitUntil(async () => (await outboxDb.pending()) === 0, 'every row sent');
    const pipeline = createPipeline({
      ledger: outboxDb.ledger,
      group: 'effects',
      retry: new RetryPolicy({ delays: ['10ms'] }),
      handler: (_message: unknown, hctx) => outboxDb.applyEffect(hctx.tx, hctx.key),
    });
    subscriptions.push(await broker.subscribe('effects', ['events'], pipeline));
    await waitUntil(async () => (await outboxDb.effects()).size === keys.length, 'an effect per key', 10_000);
    const copies = (await broker.messages('events')).length;
    await waitUntil(() => pipeline.metrics().deliveries >= copies, 'every copy consumed');
    const effects = await outboxDb.effects();
    expect([...effects.values()].every((n) => n === 1)).toBe(true);
    // The rows the dead relay published were published again, and absorbed.
    expect(survivor.metrics().republished).toBeGreaterThan(0);
    expect(copies).toBeGreaterThan(keys.length);
    expect(pipeline.metrics().outcomes.duplicate).toBeGreaterThan(0);
  });
});
