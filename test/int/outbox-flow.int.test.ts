import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  createOutbox,
  createPipeline,
  createRelay,
  createTransactionalSender,
  RetryPolicy,
  type Envelope,
  type OutgoingMessage,
  type Relay,
} from 'oncemq';
import type { LocalBroker, LocalSubscription } from 'oncemq/local';
import { testBroker, waitUntil } from '../support/local-points.js';
import { OUTBOX_DATABASES, type OutboxDb } from '../support/outbox.js';
import { scratchDir, sleep } from '../support/points.js';

const QUICK = { pollInterval: '10ms', minBackoff: '20ms', maxBackoff: '200ms' } as const;
const STEPS = ['create', 'pay', 'ship'] as const;
const QUICK_RETRY = new RetryPolicy({ delays: ['10ms', '10ms'] });

const text = (envelope: Envelope): string => Buffer.from(envelope.body).toString('utf8');

describe.each(OUTBOX_DATABASES)('the outbox end to end on $name', (factory) => {
  let db: OutboxDb<unknown> | undefined;
  let scratch: ReturnType<typeof scratchDir>;
  let broker: LocalBroker;
  const relays: Relay<unknown>[] = [];
  const subscriptions: LocalSubscription[] = [];

  beforeEach(async () => {
    db = await factory.open();
    scratch = scratchDir();
    broker = testBroker(scratch.dir, { pullBatchSize: 16 });
  });

  afterEach(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.stop()));
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    await broker.close();
    await db?.close();
    scratch.remove();
  });

  const relay = (extra: Record<string, unknown> = {}): Relay<unknown> => {
    const outboxDb = db as OutboxDb<unknown>;
    const created = createRelay({
      outbox: outboxDb.outbox,
      transport: broker,
      database: outboxDb.relayDatabase(),
      ...QUICK,
      ...extra,
    });
    relays.push(created);
    return created;
  };

  it('keeps create → pay → ship in order per order from concurrent transactions, through two relays, to an ordered consumer', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const outboxDb = db;
    const ORDERS = 40;
    const seqs: number[][] = Array.from({ length: ORDERS }, () => []);
    // Each order's steps commit one after another; the orders' transactions run side by side.
    await Promise.all(
      Array.from({ length: 4 }, async (_, lane) => {
        for (let order = lane; order < ORDERS; order += 4) {
          for (const step of STEPS) {
            const entry = await outboxDb.inTx((tx) =>
              outboxDb.outbox.add(tx, {
                topic: 'orders',
                key: `order-${order}-${step}`,
                orderingKey: `order-${order}`,
                body: { order, step },
              }),
            );
            seqs[order]?.push(entry.seq ?? 0);
          }
        }
      }),
    );
    expect(seqs.every((s) => s.join() === '1,2,3')).toBe(true);
    const applied = new Map<number, string[]>();
    let outOfOrder = 0;
    const pipeline = createPipeline<unknown, { order: number; step: (typeof STEPS)[number] }>({
      ledger: outboxDb.ledger,
      group: 'fulfilment',
      retry: QUICK_RETRY,
      handler: async (event, hctx) => {
        const done = applied.get(event.order) ?? [];
        if (STEPS.indexOf(event.step) !== done.length) outOfOrder++;
        await outboxDb.applyEffect(hctx.tx, hctx.key);
        applied.set(event.order, [...done, event.step]);
      },
    });
    subscriptions.push(await broker.subscribe('fulfilment', ['orders'], pipeline, { ordering: {} }));
    // Confirms that take a random while: a later row of a key published beside an earlier one would overtake it.
    const jittery = {
      name: 'jittery-local',
      publish: async (message: OutgoingMessage) => {
        await sleep(Math.random() * 8);
        return broker.publish(message);
      },
    };
    await Promise.all([
      relay({ batchSize: 8, transport: jittery }).start(),
      relay({ batchSize: 8, transport: jittery }).start(),
    ]);
    await waitUntil(async () => (await outboxDb.effects()).size === ORDERS * 3, 'every step applied', 60_000);
    expect(outOfOrder).toBe(0);
    expect([...applied.values()].every((steps) => steps.join() === 'create,pay,ship')).toBe(true);
    expect([...(await outboxDb.effects()).values()].every((n) => n === 1)).toBe(true);
  });

  it('ctx.outbox: consume → transform → produce once per key, and nothing from a rolled-back handler', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const outboxDb = db;
    let failOnce = true;
    const pipeline = createPipeline<unknown, { n: number }>({
      ledger: outboxDb.ledger,
      group: 'billing',
      outbox: outboxDb.outbox,
      retry: QUICK_RETRY,
      handler: async (payment, hctx) => {
        await outboxDb.applyEffect(hctx.tx, hctx.key);
        await hctx.outbox.add({ topic: 'invoices', key: `invoice-${payment.n}`, body: { n: payment.n } });
        if (payment.n === 3 && failOnce) {
          failOnce = false;
          throw new Error('crash after the follow-up was written');
        }
      },
    });
    for (let n = 0; n < 10; n++) {
      // Every payment is published twice (a producer retry): one effect, one invoice each.
      for (let copy = 0; copy < 2; copy++) {
        await broker.publish({ topic: 'payments', key: `payment-${n}`, body: { n } });
      }
    }
    subscriptions.push(await broker.subscribe('billing', ['payments'], pipeline));
    await waitUntil(() => pipeline.metrics().deliveries >= 20, 'every copy handled');
    await waitUntil(async () => (await outboxDb.effects()).size === 10, 'an effect per payment');
    await waitUntil(async () => (await outboxDb.rows()) === 10, 'ten invoices in the outbox');
    const invoices: string[] = [];
    const reader = createPipeline({
      ledger: outboxDb.ledger,
      group: 'invoices',
      handler: (_message: unknown, hctx) => {
        invoices.push(hctx.key);
      },
    });
    subscriptions.push(await broker.subscribe('invoices', ['invoices'], reader));
    await relay().start();
    await waitUntil(() => invoices.length === 10, 'ten invoices delivered');
    expect(new Set(invoices).size).toBe(10);
    expect([...(await outboxDb.effects()).values()].every((n) => n === 1)).toBe(true);
  });

  it('ctx.outbox without a configured outbox fails with a clear error, as a dead letter', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const pipeline = createPipeline({
      ledger: db.ledger,
      group: 'no-outbox',
      retry: new RetryPolicy({ delays: [] }),
      handler: async (_message: unknown, hctx) => {
        await hctx.outbox.add({ topic: 'x', key: 'k', body: 'b' });
      },
    });
    const outcome = await pipeline.process({
      brokerId: 'b-1',
      topic: 'payments',
      headers: { 'oncemq-key': 'k-1' },
      body: Buffer.from('{}'),
      deliveryCount: 1,
      publishedAt: new Date(),
    });
    expect(outcome.kind).toBe('dead');
    expect(outcome.kind === 'dead' ? outcome.error : undefined).toMatchObject({
      name: 'ConfigError',
      field: 'outbox',
    });
  });

  it('a leased pipeline, or an outbox on another database, is refused at start-up', (ctx) => {
    if (db === undefined) return ctx.skip();
    const ledger = db.ledger;
    const outbox = db.outbox;
    expect(() =>
      createPipeline({ ledger, group: 'g', mode: 'leased', outbox, handler: () => undefined }),
    ).toThrow(ConfigError);
  });

  it('inline dispatch publishes right after the commit; cleanup deletes sent rows past their retention', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const outboxDb = db;
    const sweeper = relay({ pollInterval: '20ms', retention: '0ms', cleanupEvery: '1ms' });
    const entries = await outboxDb.inTx(async (tx) => [
      await outboxDb.outbox.add(tx, { topic: 'events', key: 'a', orderingKey: 'o', body: '1' }),
      await outboxDb.outbox.add(tx, { topic: 'events', key: 'b', orderingKey: 'o', body: '2' }),
    ]);
    // The second row waits for the first: one dispatch sends the head of the key only.
    expect(await sweeper.dispatch(entries)).toEqual({ claimed: 1, published: 1, failed: 0 });
    expect(await sweeper.dispatch(entries)).toEqual({ claimed: 1, published: 1, failed: 0 });
    expect((await broker.messages('events')).map((m) => m.headers['oncemq-key'])).toEqual(['a', 'b']);
    expect(await outboxDb.rows()).toBe(2);
    await sweeper.start();
    await waitUntil(async () => (await outboxDb.rows()) === 0, 'the sent rows cleaned up');
  });

  it('sendInTransaction sends a half message committed with the local transaction, and nothing when it throws', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const outboxDb = db;
    const sender = createTransactionalSender({
      transport: broker,
      database: outboxDb.relayDatabase(),
      dialect: outboxDb.outbox.dialect,
      check: () => 'ROLLBACK',
    });
    expect(sender.via).toBe('half-message');
    const sent = await sender.sendInTransaction({ topic: 'events', key: 'paid-1', body: 'x' }, (tx) =>
      outboxDb.applyEffect(tx, 'paid-1'),
    );
    expect(sent.state).toBe('COMMIT');
    await expect(
      sender.sendInTransaction({ topic: 'events', key: 'paid-2', body: 'y' }, async (tx) => {
        await outboxDb.applyEffect(tx, 'paid-2');
        throw new Error('insufficient funds');
      }),
    ).rejects.toThrow('insufficient funds');
    await sender.close();
    expect((await broker.messages('events')).map((m) => m.headers['oncemq-key'])).toEqual(['paid-1']);
    expect([...(await outboxDb.effects()).keys()]).toEqual(['paid-1']);
  });

  it('the pipeline refuses an outbox of another database', (ctx) => {
    if (db === undefined || db.name === 'sqlite') return ctx.skip();
    const other = createOutbox({ dialect: { ...db.outbox.dialect, name: 'sqlite' } });
    const ledger = db.ledger;
    expect(() => createPipeline({ ledger, group: 'g', outbox: other, handler: () => undefined })).toThrow(
      /outbox is on sqlite/,
    );
    expect(text).toBeTypeOf('function');
  });
});
