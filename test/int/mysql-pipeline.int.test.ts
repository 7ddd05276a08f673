import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPipeline, RetryPolicy, type Outcome } from 'oncemq';
import { MysqlLedger } from 'oncemq/mysql';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';
import { paymentEnvelope, sleep, type PaymentSucceeded } from '../support/points.js';

const service = await mysqlService();
const event: PaymentSucceeded = { eventId: 'evt-1', orderId: 'order-1', userId: 'user-1', amount: 100 };

describe.skipIf(!service.available)('payment-to-points on a MariaDB ledger', () => {
  let pool: Pool;
  let table: string;
  let points: string;
  let ledger: MysqlLedger<PoolConnection>;

  beforeAll(() => {
    // 50 concurrent deliveries, each on a pool connection of its own
    pool = testPool(service.url, { size: 50 });
  });

  afterAll(async () => {
    await pool.end();
  });

  beforeEach(async () => {
    table = uniqueTable('pipe');
    points = `${table}_points`;
    await pool.query(
      `CREATE TABLE \`${points}\` (user_id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL) ENGINE = InnoDB`,
    );
    ledger = new MysqlLedger<PoolConnection>({ pool, table });
    await ledger.init();
  });

  afterEach(async () => {
    await dropLedgerTables(pool, table);
    await pool.query(`DROP TABLE IF EXISTS \`${points}\`, \`${table}_processed\``);
  });

  const addPoints = async (conn: PoolConnection | Pool, userId: string, amount: number): Promise<void> => {
    await conn.execute(
      `INSERT INTO \`${points}\` (user_id, balance) VALUES (?, ?) ON DUPLICATE KEY UPDATE balance = balance + ?`,
      [userId, amount, amount],
    );
  };
  const balance = async (userId: string): Promise<number> => {
    const [found] = await pool.execute<RowDataPacket[]>(
      `SELECT balance FROM \`${points}\` WHERE user_id = ?`,
      [userId],
    );
    return Number(found[0]?.balance ?? 0);
  };
  const ledgerRows = async (): Promise<number> => {
    const [found] = await pool.query<RowDataPacket[]>(`SELECT COUNT(*) AS n FROM \`${table}\``);
    return Number(found[0]?.n);
  };
  const pointsPipeline = (extra: { onOutcome?: (o: Outcome) => void } = {}) =>
    createPipeline<PoolConnection, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        await addPoints(ctx.tx, message.userId, 100);
      },
      ...extra,
    });

  it('applies the same event delivered twice once: one ledger row, +100 points', async () => {
    const pipeline = pointsPipeline();
    expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({
      kind: 'executed',
      action: 'ack',
      mode: 'transactional',
      attempt: 1,
    });
    expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({
      kind: 'duplicate',
      action: 'ack',
      source: 'redelivery',
    });
    expect(await balance('user-1')).toBe(100);
    expect(await ledgerRows()).toBe(1);
  });

  it('attributes a copy under another broker id to a republish', async () => {
    const pipeline = pointsPipeline();
    await pipeline.process(paymentEnvelope(event, 'broker-a'));
    expect(await pipeline.process(paymentEnvelope(event, 'broker-b'))).toMatchObject({
      kind: 'duplicate',
      source: 'republish',
    });
    expect(pipeline.metrics().duplicates).toEqual({ redelivery: 0, republish: 1, concurrent: 0 });
  });

  it('rolls back the ledger row and the points when the handler throws after its write, and a redelivery then succeeds', async () => {
    let failNext = true;
    const pipeline = createPipeline<PoolConnection, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        await addPoints(ctx.tx, message.userId, 100);
        if (failNext) {
          failNext = false;
          throw new Error('points service crashed after the write');
        }
      },
    });
    expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({
      kind: 'retry',
      delayMs: 10_000,
      reconsumeTimes: 0,
    });
    expect(await balance('user-1')).toBe(0);
    const afterFailure = await ledger.get('points', 'evt-1');
    expect(afterFailure).toMatchObject({ status: 'FAIL', attempt: 1 });
    expect(afterFailure?.remark).toContain('crashed after the write');
    expect(await pipeline.process(paymentEnvelope(event, 'broker-evt-1', 2))).toMatchObject({
      kind: 'executed',
      attempt: 2,
      reclaimed: true,
    });
    expect(await balance('user-1')).toBe(100);
    expect(await ledger.get('points', 'evt-1')).toMatchObject({ status: 'SUCCESS', attempt: 2 });
    expect(await ledgerRows()).toBe(1);
  });

  it('acks a duplicate and never schedules a retry for it', async () => {
    const outcomes: Outcome[] = [];
    const pipeline = pointsPipeline({ onOutcome: (o) => outcomes.push(o) });
    for (let i = 0; i < 5; i++) await pipeline.process(paymentEnvelope(event));
    expect(outcomes.map((o) => o.action)).toEqual(['ack', 'ack', 'ack', 'ack', 'ack']);
    expect(pipeline.metrics().outcomes).toMatchObject({ executed: 1, duplicate: 4, retry: 0, busy: 0 });
    expect(await balance('user-1')).toBe(100);
  });

  it('dead-letters a key reused with a different payload as a conflict', async () => {
    const pipeline = pointsPipeline();
    await pipeline.process(paymentEnvelope(event));
    expect(await pipeline.process(paymentEnvelope({ ...event, userId: 'user-2' }))).toMatchObject({
      kind: 'conflict',
      action: 'dead-letter',
      reason: 'conflict',
    });
    expect(await balance('user-2')).toBe(0);
  });

  it('stores the handler result and replays it to duplicates', async () => {
    const pipeline = createPipeline<PoolConnection, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        await addPoints(ctx.tx, message.userId, 100);
        const [found] = await ctx.tx.execute<RowDataPacket[]>(
          `SELECT balance FROM \`${points}\` WHERE user_id = ?`,
          [message.userId],
        );
        return { credited: 100, balance: Number(found[0]?.balance) };
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

  it('dead-letters a message without a business key as missing-key, and a non-JSON body as malformed, touching nothing', async () => {
    const pipeline = pointsPipeline();
    expect(await pipeline.process(paymentEnvelope({ ...event, eventId: '' }))).toMatchObject({
      kind: 'dead',
      reason: 'missing-key',
      key: null,
    });
    expect(
      await pipeline.process({ ...paymentEnvelope(event), body: new TextEncoder().encode('{"eventId": ') }),
    ).toMatchObject({ kind: 'dead', reason: 'malformed' });
    expect(await ledgerRows()).toBe(0);
  });

  it('dead-letters after the retry schedule is spent, with the last error', async () => {
    const pipeline = createPipeline<PoolConnection, PaymentSucceeded>({
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

  it('applies the effect once for 50 concurrent duplicate deliveries over separate pool connections', async () => {
    let executions = 0;
    const pipeline = createPipeline<PoolConnection, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        executions++;
        await addPoints(ctx.tx, message.userId, 100);
        await sleep(20); // hold the transaction open so the copies pile up on the row lock
      },
    });
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => pipeline.process(paymentEnvelope(event, `copy-${i % 3}`))),
    );
    const kinds = outcomes.map((o) => o.kind);
    expect(executions).toBe(1);
    expect(kinds.filter((k) => k === 'executed')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'duplicate')).toHaveLength(49);
    expect(await balance('user-1')).toBe(100);
    expect(await ledgerRows()).toBe(1);
  });

  it('runs a leased handler once for 20 concurrent deliveries; the rest are busy or duplicate', async () => {
    let executions = 0;
    const pipeline = createPipeline({
      ledger,
      group: 'points',
      mode: 'leased',
      key: { jsonPath: 'eventId' },
      handler: async () => {
        executions++;
        await sleep(50);
      },
    });
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, (_, i) => pipeline.process(paymentEnvelope(event, `copy-${i % 2}`))),
    );
    expect(executions).toBe(1);
    expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(1);
    expect(outcomes.every((o) => ['executed', 'busy', 'duplicate'].includes(o.kind))).toBe(true);
  });

  it('claims a batch in one transaction: 60 new events executed once, 40 copies in the same batch and 10 later ones duplicates', async () => {
    let calls = 0;
    const pipeline = createPipeline<PoolConnection, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        calls++;
        await addPoints(ctx.tx, message.userId, 100);
      },
    });
    const many = vi.spyOn(ledger, 'transactionMany');
    const single = vi.spyOn(ledger, 'transaction');
    const distinct = Array.from({ length: 60 }, (_, i) => ({
      ...event,
      eventId: `batch-${i}`,
      userId: `user-${i % 7}`,
    }));
    const batch = [...distinct, ...distinct.slice(0, 40)].map((e, i) => paymentEnvelope(e, `b-${i}`));
    const outcomes = await pipeline.processBatch(batch);
    expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(60);
    expect(outcomes.slice(60).every((o) => o.kind === 'duplicate' && o.source === 'republish')).toBe(true);
    expect(calls).toBe(60);
    expect(many).toHaveBeenCalledTimes(1);
    expect(single).not.toHaveBeenCalled();
    expect(await ledgerRows()).toBe(60);
    let total = 0;
    for (let u = 0; u < 7; u++) total += await balance(`user-${u}`);
    expect(total).toBe(6000);
    expect((await pipeline.processBatch(batch.slice(0, 10))).every((o) => o.kind === 'duplicate')).toBe(true);
  });

  it('a naive check-then-insert consumer double-applies under the same concurrent deliveries', async () => {
    const processed = `${table}_processed`;
    await pool.query(`CREATE TABLE \`${processed}\` (event_id VARCHAR(64) PRIMARY KEY) ENGINE = InnoDB`);
    const naive = async (): Promise<void> => {
      const [seen] = await pool.execute<RowDataPacket[]>(
        `SELECT 1 FROM \`${processed}\` WHERE event_id = ?`,
        [event.eventId],
      );
      if (seen.length > 0) return;
      await sleep(20);
      await pool.execute(`INSERT IGNORE INTO \`${processed}\` (event_id) VALUES (?)`, [event.eventId]);
      await addPoints(pool, event.userId, 100);
    };
    await Promise.all(Array.from({ length: 20 }, naive));
    expect(await balance('user-1')).toBeGreaterThan(100);
  });
});
