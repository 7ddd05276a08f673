import { sql } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import { ConfigError, createOutbox, createPipeline, type PipelineConfig } from 'oncemq';
import {
  drizzleBridge,
  drizzleLedger,
  type BridgedLedger,
  type DrizzleLike,
  type DrizzleSqliteLedger,
  type DrizzleTransactionLike,
} from 'oncemq/drizzle';
import { checkRollback, RollbackCheckError } from 'oncemq/testing';
import {
  mysqlServer,
  mysqlWorld,
  postgres,
  postgresWorld,
  type MysqlDb,
  type MysqlTx,
  type PgDb,
  type PgTx,
  type SqliteDb,
  type World,
} from '../support/drizzle-pipeline.js';
import { payment, paymentEnvelope, paymentEvents, type PaymentSucceeded } from '../support/points.js';
import { relayOnce } from '../support/relay.js';

/** The cases every server database runs: node-postgres and mysql2 transactions are asynchronous. */
function describeServer<Tx extends DrizzleTransactionLike, Db extends DrizzleLike<Tx>>(
  database: string,
  available: boolean,
  open: () => Promise<World<Tx, Db>>,
  abortable: boolean,
): void {
  describe.skipIf(!available)(`a pipeline on Drizzle (${database})`, () => {
    let w: World<Tx, Db>;
    beforeEach(async () => {
      w = await open();
      await w.ledger.init();
    });
    afterEach(async () => {
      await w.close();
    });

    const config = (handler: PipelineConfig<Tx, PaymentSucceeded>['handler']) => ({
      ledger: w.ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler,
    });

    it('hands the handler a Drizzle transaction and applies each event once however many copies arrive', async () => {
      const seen: unknown[] = [];
      const pipeline = createPipeline<Tx, PaymentSucceeded>(
        config(async (event, ctx) => {
          seen.push(ctx.tx);
          await w.addPoints(ctx.tx, event);
        }),
      );
      const events = paymentEvents(20);
      const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
      expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
      expect(seen).toHaveLength(20);
      expect(seen.every((tx) => tx !== w.db && typeof (tx as Tx).rollback === 'function')).toBe(true);
      const total = Object.values(await w.balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(20 * 100);
    });

    it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
      let fail = true;
      const pipeline = createPipeline<Tx, PaymentSucceeded>(
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
    });

    it('claims inside a Drizzle transaction of the application, which commits or rolls back the claim with its own writes', async () => {
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
        w.db.transaction(async (trx) => {
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

      await w.db.transaction(async (trx) => {
        await w.ledger.join(trx).transaction(request, async (tx) => {
          await w.addPoints(tx, event);
          return null;
        });
      });
      expect((await w.ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
      const again = await w.db.transaction((trx) => w.ledger.join(trx).transaction(request, () => null));
      expect(again.status).toBe('duplicate');
      expect(await w.balances()).toEqual({ [event.userId]: 100 });
    });

    it('writes outbox messages in the Drizzle transaction, relays through the bridge, and refuses the db where a transaction is needed', async () => {
      const outbox = createOutbox({ ledger: w.ledger, ...w.outbox });
      await outbox.migrate(drizzleBridge(w.db));
      await expect(
        w.db.transaction(async (trx) => {
          await outbox.add(trx, { topic: 'points-added', key: 'rolled-back', body: { n: 1 } });
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      await w.db.transaction((trx) =>
        outbox.add(trx, { topic: 'points-added', key: 'committed', body: { n: 2 } }),
      );
      expect(await w.outboxKeys()).toEqual(['committed']);
      const bare = w.db as unknown as Tx;
      expect(() => w.ledger.join(bare)).toThrow(ConfigError);
      expect(() => w.ledger.join(bare)).toThrow(/expected a Drizzle transaction/);
      await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
        /expected a Drizzle transaction/,
      );
      expect(await w.outboxKeys()).toEqual(['committed']);
      expect(await relayOnce(outbox, drizzleBridge(w.db))).toEqual(['committed']);
    });

    it.skipIf(!abortable)(
      'answers retry, never ack, when a database error caught inside the handler aborted the Drizzle transaction',
      async () => {
        const pipeline = createPipeline<Tx, PaymentSucceeded>(
          config(async (event, ctx) => {
            await w.addPoints(ctx.tx, event);
            await ctx.tx.execute(sql`SELECT 1/0`).then(
              () => undefined,
              () => undefined,
            );
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
      const report = await checkRollback<Tx, PaymentSucceeded>({
        pipeline: config(async function addPointsInTheClaim(event, ctx) {
          await w.addPoints(ctx.tx, event);
        }),
        envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
        observe: () => w.balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).not.toEqual({});
    });

    it('fails the rollback check, naming the handler, when it writes through the application’s Drizzle db', async () => {
      const check = checkRollback<Tx, PaymentSucceeded>({
        pipeline: config(async function addPointsOnTheAppDb(event) {
          await w.addPoints(w.db, event);
        }),
        envelopes: [paymentEnvelope(payment(1))],
        observe: () => w.balances(),
      });
      await expect(check).rejects.toThrow(RollbackCheckError);
      await expect(check).rejects.toThrow(/handler 'addPointsOnTheAppDb' of group 'points' wrote outside/);
    });
  });
}

describeServer('PostgreSQL, node-postgres', postgres.available, postgresWorld, true);
describeServer('MariaDB, mysql2', mysqlServer.available, mysqlWorld, false);

describe('ctx.tx through Drizzle is typed as the driver’s transaction', () => {
  it('is PgTransaction on node-postgres, MySqlTransaction on mysql2 and the db itself on better-sqlite3', () => {
    const pgLedger = (db: PgDb) => drizzleLedger(db);
    const mysqlLedger = (db: MysqlDb) => drizzleLedger(db);
    const sqliteLedger = (db: SqliteDb) => drizzleLedger(db);
    expectTypeOf(pgLedger).returns.toEqualTypeOf<BridgedLedger<PgTx>>();
    expectTypeOf(mysqlLedger).returns.toEqualTypeOf<BridgedLedger<MysqlTx>>();
    expectTypeOf(sqliteLedger).returns.toEqualTypeOf<DrizzleSqliteLedger<SqliteDb>>();
  });
});
