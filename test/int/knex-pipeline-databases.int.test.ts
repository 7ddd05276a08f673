import type { Knex } from 'knex';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, createOutbox, createPipeline, type PipelineConfig } from 'oncemq';
import { knexLedger } from 'oncemq/knex';
import { checkRollback, injectCommitFailures, RollbackCheckError } from 'oncemq/testing';
import { addPoints, KNEX_DATABASES, ledgerPlace, type World } from '../support/knex-pipeline.js';
import { payment, paymentEnvelope, paymentEvents, type PaymentSucceeded } from '../support/points.js';

for (const [database, open, available] of KNEX_DATABASES) {
  describe.skipIf(!available)(`a pipeline on Knex (${database})`, () => {
    let w: World;
    beforeEach(async () => {
      w = await open();
      await w.ledger.init();
    });
    afterEach(async () => {
      await w.close();
    });

    const config = (handler: PipelineConfig<Knex.Transaction, PaymentSucceeded>['handler']) => ({
      ledger: w.ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler,
    });

    it('hands the handler a Knex transaction and applies each event once however many copies arrive', async () => {
      const seen: boolean[] = [];
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
        config(async (event, ctx) => {
          seen.push(ctx.tx.isTransaction === true);
          await addPoints(ctx.tx, w.points, event);
        }),
      );
      const events = paymentEvents(20);
      const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
      expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
      expect(seen.every(Boolean)).toBe(true);
      const total = Object.values(await w.balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(20 * 100);
    });

    it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
      let fail = true;
      const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
        config(async (event, ctx) => {
          await addPoints(ctx.tx, w.points, event);
          if (fail) throw new Error('downstream refused');
        }),
      );
      const event = payment(7);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(await w.balances()).toEqual({});
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
    });

    it('claims inside a Knex transaction of the application, which commits or rolls back the claim with its own writes', async () => {
      const event = payment(3);
      const request = {
        group: 'points',
        key: event.eventId,
        fingerprint: null,
        brokerId: 'b',
        topic: 'payments',
        leaseMs: 30_000,
      };
      await expect(
        w.knex.transaction(async (trx) => {
          const result = await w.ledger.join(trx).transaction(request, async (tx) => {
            expect(tx).toBe(trx);
            await addPoints(tx, w.points, event);
            return null;
          });
          expect(result.status).toBe('acquired');
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await w.balances()).toEqual({});

      await w.knex.transaction(async (trx) => {
        await w.ledger.join(trx).transaction(request, async (tx) => {
          await addPoints(tx, w.points, event);
          return null;
        });
      });
      expect((await w.ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
      const again = await w.knex.transaction((trx) => w.ledger.join(trx).transaction(request, () => null));
      expect(again.status).toBe('duplicate');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
    });

    it('writes outbox messages in the Knex transaction, and refuses the knex instance where a transaction is needed', async () => {
      const outbox = createOutbox({ ledger: w.ledger, ...w.outbox });
      await outbox.migrate(w.outboxDatabase);
      const pending = async (): Promise<string[]> => {
        const table = w.outbox.schema === undefined ? w.outbox.table : `${w.outbox.schema}.${w.outbox.table}`;
        const rows = await w
          .knex<{ business_key: string; id: number }>(table)
          .select('business_key')
          .orderBy('id');
        return rows.map((r) => r.business_key);
      };
      await expect(
        w.knex.transaction(async (trx) => {
          await outbox.add(trx, { topic: 'points-added', key: 'rolled-back', body: { n: 1 } });
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      await w.knex.transaction((trx) =>
        outbox.add(trx, { topic: 'points-added', key: 'committed', body: { n: 2 } }),
      );
      expect(await pending()).toEqual(['committed']);
      const bare = w.knex as unknown as Knex.Transaction;
      expect(() => w.ledger.join(bare)).toThrow(ConfigError);
      await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
        /expected a Knex transaction/,
      );
      expect(await pending()).toEqual(['committed']);
    });

    it.skipIf(database !== 'PostgreSQL')(
      'answers retry, never ack, when a database error caught inside the handler aborted the Knex transaction',
      async () => {
        const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>(
          config(async (event, ctx) => {
            await addPoints(ctx.tx, w.points, event);
            await ctx.tx.raw('SELECT 1/0').catch(() => undefined);
          }),
        );
        const event = payment(9);
        const outcome = await pipeline.process(paymentEnvelope(event));
        expect(outcome.action).toBe('retry');
        expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
        expect(await w.balances()).toEqual({});
      },
    );

    it('passes the rollback check when the handler writes through ctx.tx', async () => {
      const report = await checkRollback<Knex.Transaction, PaymentSucceeded>({
        pipeline: config(async function addPointsInTheClaim(event, ctx) {
          await addPoints(ctx.tx, w.points, event);
        }),
        envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
        observe: () => w.balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).not.toEqual({});
    });

    it.skipIf(database === 'SQLite')(
      'fails the rollback check, naming the handler, when it writes through the application’s own knex',
      async () => {
        const trap = config(async function addPointsOnTheAppKnex(event) {
          await addPoints(w.knex, w.points, event);
        });
        const check = checkRollback<Knex.Transaction, PaymentSucceeded>({
          pipeline: trap,
          envelopes: [paymentEnvelope(payment(1))],
          observe: () => w.balances(),
        });
        await expect(check).rejects.toThrow(RollbackCheckError);
        await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
        await expect(check).rejects.toThrow(
          /handler 'addPointsOnTheAppKnex' of group 'points' wrote outside/,
        );
      },
    );

    it.skipIf(database === 'SQLite')(
      'warns, once per claim, of a write the handler ran through the application’s knex instead of ctx.tx',
      async () => {
        const warnings: { message: string; fields: unknown }[] = [];
        const logger = {
          debug: () => undefined,
          info: () => undefined,
          warn: (message: string, fields?: unknown) => warnings.push({ message, fields }),
          error: () => undefined,
        };
        const ledger = knexLedger(w.knex, { ...ledgerPlace(w), logger });
        const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>({
          ...config(async (event, ctx) => {
            await addPoints(ctx.tx, w.points, event);
            await ctx.tx.transaction((inner) => addPoints(inner, w.points, event)); // a savepoint: same connection
            await w.knex(w.points).where({ user_id: event.userId }).select(); // a read: not reported
          }),
          ledger,
        });
        expect((await pipeline.process(paymentEnvelope(payment(1)))).kind).toBe('executed');
        expect(warnings).toEqual([]);
        const trap = createPipeline<Knex.Transaction, PaymentSucceeded>({
          ...config(async (event) => {
            await addPoints(w.knex, w.points, event);
            await addPoints(w.knex, w.points, event);
          }),
          ledger,
        });
        expect((await trap.process(paymentEnvelope(payment(2)))).kind).toBe('executed');
        expect(warnings).toHaveLength(1);
        expect(warnings[0]?.message).toMatch(
          /a write ran on another connection than the claim's transaction/,
        );
        expect(JSON.stringify(warnings[0]?.fields)).toMatch(/insert into/i);
      },
    );

    it.skipIf(database === 'SQLite')(
      'shows what the trap does in production: a commit lost after the handler doubles the escaped effect',
      async () => {
        let lose = true;
        const flaky = injectCommitFailures(w.ledger, {
          commitFailure: () => {
            const now = lose;
            lose = false;
            return now;
          },
        });
        const pipeline = createPipeline<Knex.Transaction, PaymentSucceeded>({
          ...config(async (event) => {
            await addPoints(w.knex, w.points, event);
          }),
          ledger: flaky,
        });
        const event = payment(5);
        expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
        expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
        expect(await w.balances()).toEqual({ [event.userId]: 200 });
      },
    );
  });
}
