import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type pg from 'pg';
import { createPipeline, type Outcome } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { findPostgres, newPool, pointsSchema } from '../support/postgres.js';
import { payment, paymentEnvelope, paymentEvents, type PaymentSucceeded } from '../support/points.js';
import {
  describePaymentToPoints,
  expectBatchClaimedTogether,
  expectConcurrentCopiesAppliedOnce,
  type PointsWorld,
} from '../support/points-scenario.js';

const service = await findPostgres();

const event = payment(1);

/** A fresh schema with the points table and a ledger, as one payment-to-points world. */
async function openWorld(): Promise<
  PointsWorld<PgClientLike> & { pool: pg.Pool; schema: string; ledger: PostgresLedger }
> {
  const { pool, schema, addPoints, balance, close } = await pointsSchema(service.url, 4);
  const ledger = new PostgresLedger({ pool, schema });
  await ledger.init();
  return {
    pool,
    schema,
    ledger,
    addPoints,
    balance,
    ledgerRows: async () => {
      const { rows } = await pool.query<{ n: number }>(
        `SELECT COUNT(*)::int AS n FROM "${schema}".oncemq_ledger`,
      );
      return rows[0]?.n ?? 0;
    },
    close,
  };
}

describePaymentToPoints('a PostgreSQL ledger', openWorld, { skip: !service.available });

describe.skipIf(!service.available)('payment-to-points on a PostgreSQL ledger', () => {
  let world: Awaited<ReturnType<typeof openWorld>>;
  let schema: string;
  let ledger: PostgresLedger;

  beforeEach(async () => {
    world = await openWorld();
    schema = world.schema;
    ledger = world.ledger;
  });

  afterEach(async () => {
    await world.close();
  });

  const addPoints = (tx: PgClientLike, userId: string, amount: number) => world.addPoints(tx, userId, amount);
  const balance = (userId: string) => world.balance(userId);
  const points = (
    overrides: Partial<Parameters<typeof createPipeline<PgClientLike, PaymentSucceeded>>[0]> = {},
  ) =>
    createPipeline<PgClientLike, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        await addPoints(ctx.tx, message.userId, 100);
      },
      ...overrides,
    });

  it('survives its transaction connection killed while the handler awaits: a retry, no crash, then the effect once', async () => {
    let kill = true;
    const pipeline = points({
      handler: async (message, ctx) => {
        if (kill) {
          kill = false;
          const { rows } = await ctx.tx.query('SELECT pg_backend_pid() AS pid');
          const pid = (rows[0] as { pid: number }).pid;
          await world.pool.query('SELECT pg_terminate_backend($1)', [pid]);
          // the handler goes on awaiting while its connection is gone: pg emits 'error' on the client
          for (;;) {
            const { rows: alive } = await world.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [
              pid,
            ]);
            if (alive.length === 0) break;
          }
          await new Promise((resolve) => setImmediate(resolve));
        }
        await addPoints(ctx.tx, message.userId, 100);
      },
    });
    const first = await pipeline.process(paymentEnvelope(event));
    expect(first.kind).toBe('retry');
    expect(await balance(event.userId)).toBe(0);
    const second = await pipeline.process(paymentEnvelope(event, `broker-${event.eventId}`, 2));
    expect(second.kind).toBe('executed');
    expect(await balance(event.userId)).toBe(100);
    expect(await world.ledgerRows()).toBe(1);
  });

  it('applies the effect once for 50 concurrent duplicate deliveries over 50 pool connections; the rest are duplicates', async () => {
    const wide = newPool(service.url, 50);
    try {
      await expectConcurrentCopiesAppliedOnce(
        world,
        new PostgresLedger({ pool: wide, schema, migrate: false }),
        50,
      );
    } finally {
      await wide.end();
    }
  });

  describe('batches', () => {
    it('processes a batch of 100 deliveries with 40 copies in one transaction: 60 effects, 40 duplicates', async () => {
      const pipeline = await expectBatchClaimedTogether(world);
      expect(pipeline.metrics().outcomes).toMatchObject({ executed: 60, duplicate: 50 });
    });

    it('falls back to one transaction per delivery when a handler throws, so one poison message fails alone', async () => {
      const pipeline = points({
        handler: async (message, ctx) => {
          if (message.eventId === 'poison-3') throw new Error('cannot credit this one');
          await addPoints(ctx.tx, message.userId, 100);
        },
      });
      const single = vi.spyOn(ledger, 'transaction');
      const batch = paymentEvents(10, 'poison').map((e) => paymentEnvelope(e));
      const outcomes: Outcome[] = await pipeline.processBatch(batch);
      expect(outcomes.map((o) => o.kind)).toEqual([
        'executed',
        'executed',
        'executed',
        'retry',
        'executed',
        'executed',
        'executed',
        'executed',
        'executed',
        'executed',
      ]);
      expect(single).toHaveBeenCalledTimes(10);
      expect(await ledger.get('points', 'poison-3')).toMatchObject({ status: 'FAIL', attempt: 1 });
      let total = 0;
      for (let u = 0; u < 7; u++) total += await balance(`user-${u}`);
      expect(total).toBe(900);
    });

    it('answers malformed and keyless deliveries of a batch alone and claims the rest together', async () => {
      const pipeline = points();
      const outcomes = await pipeline.processBatch([
        paymentEnvelope(event),
        { ...paymentEnvelope(event), body: new TextEncoder().encode('not json') },
        paymentEnvelope({ ...event, eventId: '' }),
        paymentEnvelope({ ...event, eventId: 'evt-2' }),
      ]);
      expect(outcomes.map((o) => o.kind)).toEqual(['executed', 'dead', 'dead', 'executed']);
      expect(await balance('user-1')).toBe(200);
    });
  });
});
