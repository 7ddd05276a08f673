import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createPipeline,
  RetryPolicy,
  type Ledger,
  type Outcome,
  type Pipeline,
  type PipelineConfig,
} from 'oncemq';
import { payment, paymentEnvelope, paymentEvents, sleep, type PaymentSucceeded } from './points.js';

/** One backend's payment-to-points world: its ledger, the business write through its transaction, the checks. */
export interface PointsWorld<Tx> {
  readonly ledger: Ledger<Tx>;
  /** Adds points to a user through the claim's transaction. */
  addPoints(tx: Tx, userId: string, amount: number): unknown;
  balance(userId: string): Promise<number>;
  ledgerRows(): Promise<number>;
  close(): Promise<void>;
}

const event = payment(1);

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

    it('answers a batch holding one key twice, the second under another payload, [executed, conflict] as one by one', async () => {
      const pipeline = points();
      const outcomes = await pipeline.processBatch([
        paymentEnvelope(event, 'broker-a'),
        paymentEnvelope({ ...event, userId: 'user-2' }, 'broker-b'),
      ]);
      expect(outcomes.map((o) => o.kind)).toEqual(['executed', 'conflict']);
      expect(outcomes[1]).toMatchObject({ action: 'dead-letter', reason: 'conflict' });
      expect(await world.balance('user-1')).toBe(100);
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

/** A points pipeline on `ledger` that counts its handler runs, holding each claim's transaction `holdMs`. */
function countedPoints<Tx>(world: PointsWorld<Tx>, ledger: Ledger<Tx>, holdMs = 0) {
  const runs = { count: 0 };
  const pipeline = createPipeline<Tx, PaymentSucceeded>({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: async (message, ctx) => {
      runs.count++;
      await world.addPoints(ctx.tx, message.userId, 100);
      if (holdMs > 0) await sleep(holdMs); // hold the transaction open so the copies pile up on the claim
    },
  });
  return { pipeline, runs };
}

/**
 * Delivers 50 copies of one event at once through `ledger` (each claim's transaction held `holdMs`):
 * the handler runs once, one copy is executed and 49 are duplicates, +100 points and one ledger row.
 */
export async function expectConcurrentCopiesAppliedOnce<Tx>(
  world: PointsWorld<Tx>,
  ledger: Ledger<Tx>,
  holdMs: number,
): Promise<void> {
  const { pipeline, runs } = countedPoints(world, ledger, holdMs);
  const outcomes = await Promise.all(
    Array.from({ length: 50 }, (_, i) => pipeline.process(paymentEnvelope(event, `copy-${i % 3}`))),
  );
  const kinds = outcomes.map((o) => o.kind);
  expect(runs.count).toBe(1);
  expect(kinds.filter((k) => k === 'executed')).toHaveLength(1);
  expect(kinds.filter((k) => k === 'duplicate')).toHaveLength(49);
  expect(await world.balance('user-1')).toBe(100);
  expect(await world.ledgerRows()).toBe(1);
}

/**
 * Processes one batch of 60 new events and 40 copies of them: one batch claim and no single one,
 * 60 handler runs and effects, the copies duplicates by republish; 10 of them again are duplicates.
 * Answers the pipeline, for checks of its metrics.
 */
export async function expectBatchClaimedTogether<Tx>(world: PointsWorld<Tx>): Promise<Pipeline> {
  const { pipeline, runs } = countedPoints(world, world.ledger);
  const many = vi.spyOn(world.ledger, 'transactionMany');
  const single = vi.spyOn(world.ledger, 'transaction');
  const distinct = paymentEvents(60);
  const batch = [...distinct, ...distinct.slice(0, 40)].map((e, i) => paymentEnvelope(e, `b-${i}`));
  const outcomes = await pipeline.processBatch(batch);
  expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(60);
  expect(outcomes.slice(60).every((o) => o.kind === 'duplicate' && o.source === 'republish')).toBe(true);
  expect(runs.count).toBe(60);
  expect(many).toHaveBeenCalledTimes(1);
  expect(single).not.toHaveBeenCalled();
  expect(await world.ledgerRows()).toBe(60);
  let total = 0;
  for (let u = 0; u < 7; u++) total += await world.balance(`user-${u}`);
  expect(total).toBe(6000);
  const again = await pipeline.processBatch(batch.slice(0, 10));
  expect(again.every((o) => o.kind === 'duplicate')).toBe(true);
  return pipeline;
}

/**
 * Delivers one copy of one event per ledger at once (under two broker ids) through leased
 * pipelines: the handler runs once, one copy is executed and the rest are busy or duplicates.
 */
export async function expectLeasedCopiesRunOnce(ledgers: readonly Ledger[]): Promise<void> {
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
  expect(executions).toBe(1);
  expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(1);
  expect(outcomes.every((o) => ['executed', 'busy', 'duplicate'].includes(o.kind))).toBe(true);
}
