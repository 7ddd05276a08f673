// A pipeline on MikroORM and the rollback check: writes through ctx.tx and orm.em pass it, a fork of
// the handler's own fails it, and what that does when a commit is lost.
import type { EntityManager } from '@mikro-orm/core';
import { describe, expect, it } from 'vitest';
import { createPipeline } from 'oncemq';
import { checkRollback, injectCommitFailures, RollbackCheckError } from 'oncemq/testing';
import { MIKRO_ORM_DATABASES, mikroOrmPipelineScope, type World } from '../support/mikro-orm-pipeline.js';
import { payment, paymentEnvelope, paymentEvents, type PaymentSucceeded } from '../support/points.js';

for (const [database, open, available] of MIKRO_ORM_DATABASES) {
  describe.skipIf(!available)(`a pipeline on MikroORM (${database})`, () => {
    let w: World;
    const { credit, balances, config } = mikroOrmPipelineScope(open, (opened) => (w = opened));

    it('passes the rollback check when the handler writes through ctx.tx', async () => {
      const report = await checkRollback<EntityManager, PaymentSucceeded>({
        pipeline: config(function creditInTheClaim(event, ctx) {
          credit(ctx.tx, event);
        }),
        envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
        observe: () => balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).toEqual({ 'user-0': 100, 'user-1': 100, 'user-2': 100 });
    });

    it('passes the rollback check when the handler writes through orm.em, which MikroORM resolves to the transaction’s', async () => {
      const report = await checkRollback<EntityManager, PaymentSucceeded>({
        pipeline: config(async function creditOnTheGlobalEm(event) {
          await w.orm.em.insert(w.credits, { eventId: event.eventId, userId: event.userId, amount: 100 });
        }),
        envelopes: paymentEvents(2, 'global').map((event) => paymentEnvelope(event)),
        observe: () => balances(),
      });
      expect(report).toMatchObject({ rolledBack: 2, before: {}, afterRollback: {} });
    });

    it('fails the rollback check, naming the handler, when it writes through a fork of its own', async () => {
      const check = checkRollback<EntityManager, PaymentSucceeded>({
        pipeline: config(async function creditOnAFork(event) {
          await w.orm.em
            .fork()
            .insert(w.credits, { eventId: event.eventId, userId: event.userId, amount: 100 });
        }),
        envelopes: [paymentEnvelope(payment(1))],
        observe: () => balances(),
      });
      await expect(check).rejects.toThrow(RollbackCheckError);
      await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
      await expect(check).rejects.toThrow(/handler 'creditOnAFork' of group 'points' wrote outside/);
    });

    it('shows what that mistake does in production: a commit lost after the handler doubles the escaped effect', async () => {
      let lose = true;
      const flaky = injectCommitFailures(w.ledger, {
        commitFailure: () => {
          const now = lose;
          lose = false;
          return now;
        },
      });
      const pipeline = createPipeline({
        ...config(async (event) => {
          await w.orm.em
            .fork()
            .insert(w.credits, { eventId: event.eventId, userId: event.userId, amount: 100 });
        }),
        ledger: flaky,
      });
      const event = payment(5);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(await balances()).toEqual({ [event.userId]: 200 });
    });
  });
}
