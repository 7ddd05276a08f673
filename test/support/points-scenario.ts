import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, RetryPolicy, type Ledger, type Outcome, type PipelineConfig } from 'oncemq';
import { paymentEnvelope, type PaymentSucceeded } from './points.js';

/** One backend's payment-to-points world: its ledger, the business write through its transaction, the checks. */
export interface PointsWorld<Tx> {
  readonly ledger: Ledger<Tx>;
  /** Adds points to a user through the claim's transaction. */
  addPoints(tx: Tx, userId: string, amount: number): unknown;
  balance(userId: string): Promise<number>;
  ledgerRows(): Promise<number>;
  close(): Promise<void>;
}

const event: PaymentSucceeded = { eventId: 'evt-1', orderId: 'order-1', userId: 'user-1', amount: 100 };

/**
 * The payment-to-points scenario every transactional ledger must pass: the same cases on SQLite,
 * PostgreSQL and MariaDB, each spec giving only how to open its world.
 */
export function describePaymentToPoints<Tx>(
  name: string,
  open: () => Promise<PointsWorld<Tx>>,
  options: { readonly skip?: boolean } = {},
): void {
  describe.skipIf(options.skip === true)(`payment-to-points on ${name}`, () => {
    let world: PointsWorld<Tx>;

    beforeEach(async () => {
      world = await open();
    });

    afterEach(async () => {
      await world.close();
    });

    const points = (overrides: Partial<PipelineConfig<Tx, PaymentSucceeded>> = {}) =>
      createPipeline<Tx, PaymentSucceeded>({
        ledger: world.ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          await world.addPoints(ctx.tx, message.userId, 100);
        },
        ...overrides,
      });

    it('applies the same event delivered twice once: one ledger row, +100 points', async () => {
      let calls = 0;
      const pipeline = points({
        handler: async (message, ctx) => {
          calls++;
          await world.addPoints(ctx.tx, message.userId, 100);
        },
      });
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
      expect(calls).toBe(1);
      expect(await world.balance('user-1')).toBe(100);
      expect(await world.ledgerRows()).toBe(1);
    });

    it('attributes a copy under another broker id to a republish', async () => {
      const pipeline = points();
      await pipeline.process(paymentEnvelope(event, 'broker-a'));
      expect(await pipeline.process(paymentEnvelope(event, 'broker-b'))).toMatchObject({
        kind: 'duplicate',
        source: 'republish',
      });
      expect(pipeline.metrics().duplicates).toEqual({ redelivery: 0, republish: 1, concurrent: 0 });
    });

    it('rolls back the ledger row and the points when the handler throws after its write, and a redelivery then succeeds', async () => {
      let failNext = true;
      const pipeline = points({
        handler: async (message, ctx) => {
          await world.addPoints(ctx.tx, message.userId, 100);
          if (failNext) {
            failNext = false;
            throw new Error('points service crashed after the write');
          }
        },
      });
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({
        kind: 'retry',
        action: 'retry',
        delayMs: 10_000,
        reconsumeTimes: 0,
      });
      expect(await world.balance('user-1')).toBe(0);
      const afterFailure = await world.ledger.get('points', 'evt-1');
      expect(afterFailure).toMatchObject({ status: 'FAIL', attempt: 1 });
      expect(afterFailure?.remark).toContain('crashed after the write');

      const redelivered = await pipeline.process(paymentEnvelope(event, 'broker-evt-1', 2));
      expect(redelivered).toMatchObject({ kind: 'executed', attempt: 2, reclaimed: true });
      expect(await world.balance('user-1')).toBe(100);
      expect(await world.ledger.get('points', 'evt-1')).toMatchObject({ status: 'SUCCESS', attempt: 2 });
      expect(await world.ledgerRows()).toBe(1);
    });

    it('acks a duplicate and never schedules a retry for it', async () => {
      const outcomes: Outcome[] = [];
      const pipeline = points({ onOutcome: (outcome) => outcomes.push(outcome) });
      for (let i = 0; i < 5; i++) await pipeline.process(paymentEnvelope(event));
      expect(outcomes.map((o) => o.action)).toEqual(['ack', 'ack', 'ack', 'ack', 'ack']);
      expect(pipeline.metrics().outcomes).toMatchObject({ executed: 1, duplicate: 4, retry: 0, busy: 0 });
      expect(await world.balance('user-1')).toBe(100);
    });

    it('dead-letters a key reused with a different payload as a conflict', async () => {
      const pipeline = points();
      await pipeline.process(paymentEnvelope(event));
      expect(await pipeline.process(paymentEnvelope({ ...event, userId: 'user-2' }))).toMatchObject({
        kind: 'conflict',
        action: 'dead-letter',
        reason: 'conflict',
      });
      expect(await world.balance('user-2')).toBe(0);
    });

    it('stores the handler result and replays it to duplicates', async () => {
      const pipeline = points({
        handler: async (message, ctx) => {
          await world.addPoints(ctx.tx, message.userId, 100);
          return { credited: 100, user: message.userId };
        },
      });
      const result = { credited: 100, user: 'user-1' };
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'executed', result });
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'duplicate', result });
    });

    it('dead-letters a message without a business key as missing-key and a non-JSON body as malformed, touching nothing', async () => {
      const pipeline = points({
        handler: () => {
          throw new Error('must not run');
        },
      });
      expect(await pipeline.process(paymentEnvelope({ ...event, eventId: '' }))).toMatchObject({
        kind: 'dead',
        action: 'dead-letter',
        reason: 'missing-key',
        key: null,
      });
      expect(
        await pipeline.process({ ...paymentEnvelope(event), body: new TextEncoder().encode('{"eventId": ') }),
      ).toMatchObject({ kind: 'dead', reason: 'malformed' });
      expect(await world.ledgerRows()).toBe(0);
    });

    it('dead-letters after the retry schedule is spent, with the last error', async () => {
      const pipeline = points({
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
      expect(await world.ledger.get('points', 'evt-1')).toMatchObject({ status: 'FAIL', attempt: 3 });
    });
  });
}
