import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, RetryPolicy, type Ledger } from 'oncemq';
import { payment, paymentEnvelope, type PaymentSucceeded } from './points.js';

/**
 * A payment-to-points world whose commits can be made to fail after the handler succeeded: by the
 * database itself at COMMIT (a deferred constraint), or by `injectCommitFailures` where the database
 * has no deferred constraints.
 */
export interface CommitFailureWorld<Tx> {
  readonly ledger: Ledger<Tx>;
  /** What the failed commit says (the database's COMMIT error, or the injected fault). */
  readonly commitError: RegExp;
  /**
   * The database itself refuses the commit (a constraint): charged to the message, which ends
   * dead-lettered if it keeps failing. Otherwise the commit is lost as in an outage: not charged.
   */
  readonly refusedByDatabase: boolean;
  /** The business write in the claim's transaction: +100 points to the user and a grant row for the event. */
  credit(tx: Tx, event: PaymentSucceeded): unknown;
  /** From now on, every commit of a transaction that credits `event` fails; its statements all succeed. */
  breakCommits(event: PaymentSucceeded): Promise<void>;
  /** Lets those commits through again. */
  mendCommits(event: PaymentSucceeded): Promise<void>;
  balance(userId: string): Promise<number>;
  /** Grant rows of an event: the effects that were committed. */
  grants(eventId: string): Promise<number>;
  close(): Promise<void>;
}

/**
 * "The transaction rejects after a successful handler": the outcome is `retry` (never an ack), nothing
 * is applied, and the redelivery applies the effect exactly once — one by one and in a batch. A pipeline
 * that acked as soon as the handler returned would lose these effects.
 */
export function describeCommitFailure<Tx>(
  name: string,
  open: () => Promise<CommitFailureWorld<Tx>>,
  options: { readonly skip?: boolean } = {},
): void {
  describe.skipIf(options.skip === true)(`a commit that fails after the handler on ${name}`, () => {
    let world: CommitFailureWorld<Tx>;
    let runs: string[];

    beforeEach(async () => {
      world = await open();
      runs = [];
    });

    afterEach(async () => {
      await world.close();
    });

    const points = (retry?: RetryPolicy) =>
      createPipeline<Tx, PaymentSucceeded>({
        ledger: world.ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        ...(retry === undefined ? {} : { retry }),
        handler: async (event, ctx) => {
          runs.push(event.eventId);
          await world.credit(ctx.tx, event);
        },
      });

    it('answers retry, not ack, while the commit fails, and applies the effect once after redelivery', async () => {
      const event = payment(1);
      const pipeline = points();
      await world.breakCommits(event);
      for (const delivery of [1, 2]) {
        const outcome = await pipeline.process(paymentEnvelope(event, 'b-1', delivery));
        expect(outcome).toMatchObject({
          kind: 'retry',
          action: 'retry',
          nextDeliveryCount: world.refusedByDatabase ? delivery + 1 : delivery,
        });
        expect(outcome.kind === 'retry' && String(outcome.error)).toMatch(world.commitError);
      }
      expect(runs).toEqual(['evt-1', 'evt-1']);
      expect(await world.grants('evt-1')).toBe(0);
      expect(await world.balance('user-1')).toBe(0);
      expect((await world.ledger.get('points', 'evt-1'))?.status).not.toBe('SUCCESS');

      await world.mendCommits(event);
      expect(await pipeline.process(paymentEnvelope(event, 'b-1', 3))).toMatchObject({
        kind: 'executed',
        action: 'ack',
      });
      expect(await pipeline.process(paymentEnvelope(event, 'b-1', 3))).toMatchObject({
        kind: 'duplicate',
        action: 'ack',
      });
      expect(runs).toHaveLength(3);
      expect(await world.grants('evt-1')).toBe(1);
      expect(await world.balance('user-1')).toBe(100);
      expect(await world.ledger.get('points', 'evt-1')).toMatchObject({ status: 'SUCCESS' });
    });

    it('a commit the database refuses every time is charged and ends dead-lettered, never retried for ever', async (ctx) => {
      if (!world.refusedByDatabase) ctx.skip();
      const event = payment(1);
      const pipeline = points(new RetryPolicy({ delays: [10, 10] }));
      await world.breakCommits(event);
      const kinds: string[] = [];
      for (let delivery = 1; delivery <= 3; delivery++) {
        const outcome = await pipeline.process(paymentEnvelope(event, 'b-1', delivery));
        kinds.push(outcome.kind);
        if (outcome.kind === 'dead') expect(outcome.reason).toBe('retries-exhausted');
      }
      expect(kinds).toEqual(['retry', 'retry', 'dead']);
      expect(await world.grants('evt-1')).toBe(0);
    });

    it('answers retry for the delivery of a batch whose commit fails; the batch applies every other effect once', async () => {
      const events = [payment(1), payment(2), payment(3)];
      const pipeline = points();
      await world.breakCommits(payment(2));
      const first = await pipeline.processBatch(events.map((event) => paymentEnvelope(event)));
      expect(first.map((outcome) => outcome.kind)).toEqual(['executed', 'retry', 'executed']);
      expect(first[1]?.action).toBe('retry');
      expect(await world.grants('evt-2')).toBe(0);

      await world.mendCommits(payment(2));
      const again = await pipeline.processBatch(events.map((event) => paymentEnvelope(event, 'again', 2)));
      expect(again.map((outcome) => outcome.kind)).toEqual(['duplicate', 'executed', 'duplicate']);
      for (const event of events) expect(await world.grants(event.eventId)).toBe(1);
      for (const user of ['user-0', 'user-1', 'user-2']) expect(await world.balance(user)).toBe(100);
    });
  });
}
