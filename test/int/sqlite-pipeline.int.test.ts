import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, LeaseLostError, RetryPolicy, type Outcome } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import {
  addPoints,
  balance,
  openPointsDb,
  paymentEnvelope,
  scratchDir,
  sleep,
  type PaymentSucceeded,
} from '../support/points.js';

const event: PaymentSucceeded = { eventId: 'evt-1', orderId: 'order-1', userId: 'user-1', amount: 100 };

describe('payment-to-points on a SQLite ledger', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let db: Database.Database;
  let ledger: SqliteLedger<Database.Database>;

  beforeEach(async () => {
    scratch = scratchDir();
    db = openPointsDb(join(scratch.dir, 'app.db'));
    ledger = new SqliteLedger({ database: db });
    await ledger.init();
  });

  afterEach(async () => {
    await ledger.close();
    db.close();
    scratch.remove();
  });

  const ledgerRows = (): number =>
    (db.prepare('SELECT COUNT(*) AS n FROM oncemq_ledger').get() as { n: number }).n;

  it('applies the same event delivered twice once: one ledger row, +100 points', async () => {
    let calls = 0;
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: (message, ctx) => {
        calls++;
        addPoints(ctx.tx, message.userId, 100);
      },
    });
    const first = await pipeline.process(paymentEnvelope(event));
    const second = await pipeline.process(paymentEnvelope(event));
    expect(first).toMatchObject({ kind: 'executed', action: 'ack', mode: 'transactional', attempt: 1 });
    expect(second).toMatchObject({ kind: 'duplicate', action: 'ack', source: 'redelivery' });
    expect(calls).toBe(1);
    expect(balance(db, 'user-1')).toBe(100);
    expect(ledgerRows()).toBe(1);
  });

  it('attributes a copy under another broker id to a republish', async () => {
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: (message, ctx) => {
        addPoints(ctx.tx, message.userId, 100);
      },
    });
    await pipeline.process(paymentEnvelope(event, 'broker-a'));
    const copy = await pipeline.process(paymentEnvelope(event, 'broker-b'));
    expect(copy).toMatchObject({ kind: 'duplicate', source: 'republish' });
    expect(pipeline.metrics().duplicates).toEqual({ redelivery: 0, republish: 1, concurrent: 0 });
  });

  it('rolls back the ledger row and the points when the handler throws after its write, and a redelivery then succeeds', async () => {
    let failNext = true;
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: (message, ctx) => {
        addPoints(ctx.tx, message.userId, 100);
        if (failNext) {
          failNext = false;
          throw new Error('points service crashed after the write');
        }
      },
    });
    const failed = await pipeline.process(paymentEnvelope(event));
    expect(failed).toMatchObject({ kind: 'retry', action: 'retry', delayMs: 10_000, reconsumeTimes: 0 });
    expect(balance(db, 'user-1')).toBe(0);
    const afterFailure = await ledger.get('points', 'evt-1');
    expect(afterFailure).toMatchObject({ status: 'FAIL', attempt: 1 });
    expect(afterFailure?.remark).toContain('crashed after the write');

    const redelivered = await pipeline.process(paymentEnvelope(event, 'broker-evt-1', 2));
    expect(redelivered).toMatchObject({ kind: 'executed', attempt: 2, reclaimed: true });
    expect(balance(db, 'user-1')).toBe(100);
    expect(await ledger.get('points', 'evt-1')).toMatchObject({ status: 'SUCCESS', attempt: 2 });
    expect(ledgerRows()).toBe(1);
  });

  it('acks a duplicate and never schedules a retry for it', async () => {
    const outcomes: Outcome[] = [];
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: (message, ctx) => {
        addPoints(ctx.tx, message.userId, 100);
      },
      onOutcome: (outcome) => outcomes.push(outcome),
    });
    for (let i = 0; i < 5; i++) await pipeline.process(paymentEnvelope(event));
    expect(outcomes.map((o) => o.action)).toEqual(['ack', 'ack', 'ack', 'ack', 'ack']);
    expect(pipeline.metrics().outcomes).toMatchObject({ executed: 1, duplicate: 4, retry: 0, busy: 0 });
    expect(balance(db, 'user-1')).toBe(100);
  });

  it('dead-letters a key reused with a different payload as a conflict', async () => {
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: (message, ctx) => {
        addPoints(ctx.tx, message.userId, 100);
      },
    });
    await pipeline.process(paymentEnvelope(event));
    const reused = await pipeline.process(paymentEnvelope({ ...event, userId: 'user-2' }));
    expect(reused).toMatchObject({ kind: 'conflict', action: 'dead-letter', reason: 'conflict' });
    expect(balance(db, 'user-2')).toBe(0);
  });

  it('stores the handler result and replays it to duplicates', async () => {
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: (message, ctx) => {
        addPoints(ctx.tx, message.userId, 100);
        return { credited: 100, balance: balance(ctx.tx, message.userId) };
      },
    });
    expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({
      kind: 'executed',
      result: { credited: 100, balance: 100 },
    });
    expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({
      kind: 'duplicate',
      result: { credited: 100, balance: 100 },
    });
  });

  it('dead-letters a message without a business key as missing-key, touching nothing', async () => {
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: () => {
        throw new Error('must not run');
      },
    });
    const outcome = await pipeline.process(paymentEnvelope({ ...event, eventId: '' }));
    expect(outcome).toMatchObject({ kind: 'dead', action: 'dead-letter', reason: 'missing-key', key: null });
    expect(ledgerRows()).toBe(0);
  });

  it('dead-letters a body that is not JSON as malformed', async () => {
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: () => undefined,
    });
    const outcome = await pipeline.process({
      ...paymentEnvelope(event),
      body: new TextEncoder().encode('{"eventId": '),
    });
    expect(outcome).toMatchObject({ kind: 'dead', reason: 'malformed' });
  });

  it('dead-letters after the retry schedule is spent, with the last error', async () => {
    const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      retry: new RetryPolicy({ delays: ['1s', '2s'] }),
      replayMargin: 0,
      handler: () => {
        throw new Error('always down');
      },
    });
    const kinds = [];
    for (let delivery = 1; delivery <= 3; delivery++) {
      kinds.push((await pipeline.process(paymentEnvelope(event, 'b', delivery))).kind);
    }
    expect(kinds).toEqual(['retry', 'retry', 'dead']);
    expect(await ledger.get('points', 'evt-1')).toMatchObject({ status: 'FAIL', attempt: 3 });
  });
});

describe('leased mode on a SQLite ledger file shared by separate connections', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let path: string;

  beforeEach(() => {
    scratch = scratchDir();
    path = join(scratch.dir, 'ledger.db');
  });

  afterEach(() => {
    scratch.remove();
  });

  it('runs the effect once for 20 concurrent deliveries of one key; the rest are busy or duplicate', async () => {
    const ledgers = Array.from({ length: 20 }, () => new SqliteLedger({ database: path }));
    let executions = 0;
    const outcomes = await Promise.all(
      ledgers.map((ledger, i) =>
        createPipeline({
          ledger,
          group: 'points',
          mode: 'leased',
          key: { jsonPath: 'eventId' },
          handler: async () => {
            executions++;
            await sleep(50);
          },
        }).process(paymentEnvelope(event, `copy-${i % 2}`)),
      ),
    );
    const kinds = outcomes.map((o) => o.kind);
    expect(executions).toBe(1);
    expect(kinds.filter((k) => k === 'executed')).toHaveLength(1);
    expect(kinds.every((k) => k === 'executed' || k === 'busy' || k === 'duplicate')).toBe(true);
    await Promise.all(ledgers.map((ledger) => ledger.close()));
  });

  it('a naive check-then-insert consumer double-applies under the same concurrent deliveries', async () => {
    const dbs = Array.from({ length: 20 }, () => openPointsDb(path));
    dbs[0]?.exec('CREATE TABLE IF NOT EXISTS processed (event_id TEXT PRIMARY KEY)');
    const naive = async (db: Database.Database): Promise<void> => {
      const seen = db.prepare('SELECT 1 FROM processed WHERE event_id = ?').get(event.eventId);
      if (seen !== undefined) return;
      await sleep(20); // any await between check and act: a validation call, a lookup
      db.prepare('INSERT OR IGNORE INTO processed (event_id) VALUES (?)').run(event.eventId);
      addPoints(db, event.userId, 100);
    };
    await Promise.all(dbs.map((db) => naive(db)));
    expect(balance(dbs[0] as Database.Database, 'user-1')).toBeGreaterThan(100);
    for (const db of dbs) db.close();
  });

  it('reclaims a stale lease, and the old owner can no longer complete', async () => {
    let now = 1_000_000;
    const clock = (): number => now;
    const ledger = new SqliteLedger({ database: path, clock });
    await ledger.init();
    const request = {
      group: 'points',
      key: 'evt-1',
      fingerprint: 'fp',
      brokerId: 'b1',
      topic: 'payments',
      leaseMs: 30_000,
    };
    const first = await ledger.claim(request);
    expect(first.status).toBe('acquired');
    expect(await ledger.claim({ ...request, brokerId: 'b2' })).toMatchObject({ status: 'busy' });
    now += 30_001;
    const second = await ledger.claim({ ...request, brokerId: 'b2' });
    expect(second).toMatchObject({ status: 'reclaimed', claim: { attempt: 2 } });
    if (first.status !== 'acquired' || second.status !== 'reclaimed') throw new Error('unexpected claims');
    await expect(ledger.complete(first.claim, null)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(ledger.renew(first.claim, 30_000)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(ledger.release(first.claim)).rejects.toBeInstanceOf(LeaseLostError);
    await ledger.complete(second.claim, '"done"');
    expect(await ledger.get('points', 'evt-1')).toMatchObject({
      status: 'SUCCESS',
      attempt: 2,
      result: '"done"',
    });
    await ledger.close();
  });
});
