import { CamelCasePlugin, sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, createOutbox, createPipeline, createRelay, type PipelineConfig } from 'oncemq';
import { kyselyLedger } from 'oncemq/kysely';
import { checkRollback, injectCommitFailures, RollbackCheckError } from 'oncemq/testing';
import { KYSELY_DATABASES, type Trx, type World } from '../support/kysely-pipeline.js';
import { payment, paymentEnvelope, paymentEvents, type PaymentSucceeded } from '../support/points.js';

const QUICK = { pollInterval: '10ms', minBackoff: '20ms', maxBackoff: '200ms' } as const;

for (const [database, open, available] of KYSELY_DATABASES) {
  describe.skipIf(!available)(`a pipeline on Kysely (${database})`, () => {
    let w: World;
    beforeEach(async () => {
      w = await open();
      await w.ledger.init();
    });
    afterEach(async () => {
      await w.close();
    });

    const config = (handler: PipelineConfig<Trx, PaymentSucceeded>['handler']) => ({
      ledger: w.ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler,
    });

    it('hands the handler a Kysely transaction and applies each event once however many copies arrive', async () => {
      const seen: boolean[] = [];
      const pipeline = createPipeline<Trx, PaymentSucceeded>(
        config(async (event, ctx) => {
          seen.push(ctx.tx.isTransaction);
          await w.addPoints(ctx.tx, event);
        }),
      );
      const events = paymentEvents(20);
      const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
      expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
      expect(seen).toHaveLength(20);
      expect(seen.every(Boolean)).toBe(true);
      const total = Object.values(await w.balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(20 * 100);
    });

    it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
      let fail = true;
      const pipeline = createPipeline<Trx, PaymentSucceeded>(
        config(async (event, ctx) => {
          await w.addPoints(ctx.tx, event);
          if (fail) throw new Error('downstream refused');
        }),
      );
      const event = payment(7);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(await w.balances()).toEqual({});
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
      expect((await pipeline.process(paymentEnvelope(event, 'b-3', 3))).kind).toBe('duplicate');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
    });

    it('claims inside a Kysely transaction of the application, which commits or rolls back the claim with its own writes', async () => {
      const event = payment(3);
      const request = {
        group: 'points',
        key: event.eventId,
        fingerprint: null,
        brokerId: 'b',
        topic: 'payments',
        leaseMs: 30_000,
      };
      const other = { ...event, userId: 'user-other' };
      await expect(
        w.db.transaction().execute(async (trx) => {
          await w.addPoints(trx, other);
          const result = await w.ledger.join(trx).transaction(request, async (tx) => {
            expect(tx).toBe(trx);
            await w.addPoints(tx, event);
            return null;
          });
          expect(result.status).toBe('acquired');
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await w.balances()).toEqual({});

      await w.db.transaction().execute(async (trx) => {
        await w.ledger.join(trx).transaction(request, async (tx) => {
          await w.addPoints(tx, event);
          return null;
        });
        await w.addPoints(trx, other);
      });
      expect((await w.ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
      const again = await w.db
        .transaction()
        .execute((trx) => w.ledger.join(trx).transaction(request, () => null));
      expect(again.status).toBe('duplicate');
      expect(await w.balances()).toEqual({ [event.userId]: 100, [other.userId]: 100 });
    });

    it('writes outbox messages in the Kysely transaction, relays them through the bridge, and refuses the Kysely instance where a transaction is needed', async () => {
      const outbox = createOutbox({ ledger: w.ledger, ...w.outbox });
      await outbox.migrate(w.outboxDatabase);
      await expect(
        w.db.transaction().execute(async (trx) => {
          await outbox.add(trx, { topic: 'points-added', key: 'rolled-back', body: { n: 1 } });
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      await w.db
        .transaction()
        .execute((trx) => outbox.add(trx, { topic: 'points-added', key: 'committed', body: { n: 2 } }));
      expect(await w.pending()).toEqual(['committed']);

      const bare = w.db as unknown as Trx;
      expect(() => w.ledger.join(bare)).toThrow(ConfigError);
      expect(() => w.ledger.join(bare)).toThrow(/expected a Kysely transaction/);
      await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
        /expected a Kysely transaction/,
      );
      await w.db.transaction().execute((trx) => {
        expect(() => kyselyLedger(trx)).toThrow(/expected the Kysely instance, not a transaction/);
        return Promise.resolve();
      });
      expect(await w.pending()).toEqual(['committed']);

      const sent: (string | undefined)[] = [];
      const relay = createRelay({
        outbox,
        transport: {
          name: 'memory',
          publish: (message) => {
            sent.push(message.key);
            return Promise.resolve({ brokerId: `m-${sent.length}`, topic: message.topic });
          },
        },
        database: w.outboxDatabase,
        ...QUICK,
      });
      expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 1, failed: 0 });
      expect(sent).toEqual(['committed']);
      expect(await relay.runOnce()).toMatchObject({ claimed: 0, published: 0 });
    });

    it('runs the ledger without the instance’s plugins: a CamelCasePlugin renames the handler’s columns, never the ledger’s', async () => {
      const camel = w.connect([new CamelCasePlugin()]);
      try {
        const ledger = w.ledgerOn(camel);
        const renamed: unknown[] = [];
        const pipeline = createPipeline<Trx, PaymentSucceeded>({
          ...config(async (event, ctx) => {
            renamed.push(await ctx.tx.selectNoFrom(sql<number>`1`.as('points_added')).executeTakeFirst());
            await w.addPoints(ctx.tx, event);
          }),
          ledger,
        });
        const event = payment(11);
        expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('executed');
        expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('duplicate');
        expect(renamed).toEqual([{ pointsAdded: 1 }]);
        const record = await ledger.get('points', event.eventId);
        expect(record).toMatchObject({
          group: 'points',
          key: event.eventId,
          status: 'SUCCESS',
          brokerId: `broker-${event.eventId}`,
          topic: 'payments',
        });
        expect(record).toEqual(await w.ledger.get('points', event.eventId));
        expect(await w.balances()).toEqual({ [event.userId]: 100 });
      } finally {
        await camel.destroy();
      }
    });

    it.skipIf(database !== 'PostgreSQL')(
      'answers retry, never ack, when a database error caught inside the handler aborted the Kysely transaction',
      async () => {
        const pipeline = createPipeline<Trx, PaymentSucceeded>(
          config(async (event, ctx) => {
            await w.addPoints(ctx.tx, event);
            await sql`SELECT 1/0`.execute(ctx.tx).catch(() => undefined);
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
      const report = await checkRollback<Trx, PaymentSucceeded>({
        pipeline: config(async function addPointsInTheClaim(event, ctx) {
          await w.addPoints(ctx.tx, event);
        }),
        envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
        observe: () => w.balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).not.toEqual({});
    });

    it.skipIf(database === 'SQLite')(
      'fails the rollback check, naming the handler, when it writes through the application’s own Kysely instance',
      async () => {
        const trap = config(async function addPointsOnTheAppDb(event) {
          await w.addPoints(w.db, event);
        });
        const check = checkRollback<Trx, PaymentSucceeded>({
          pipeline: trap,
          envelopes: [paymentEnvelope(payment(1))],
          observe: () => w.balances(),
        });
        await expect(check).rejects.toThrow(RollbackCheckError);
        await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
        await expect(check).rejects.toThrow(/handler 'addPointsOnTheAppDb' of group 'points' wrote outside/);
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
        const pipeline = createPipeline<Trx, PaymentSucceeded>({
          ...config(async (event) => {
            await w.addPoints(w.db, event);
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
