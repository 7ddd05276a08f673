import { join } from 'node:path';
import Database from 'better-sqlite3';
import { asc, sql } from 'drizzle-orm';
import { drizzle as drizzleSqlite, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleMysql, type MySql2Database } from 'drizzle-orm/mysql2';
import { int, mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { integer as pgInteger, pgSchema, text as pgText } from 'drizzle-orm/pg-core';
import { integer as sqliteInteger, sqliteTable, text as sqliteText } from 'drizzle-orm/sqlite-core';
import mysql from 'mysql2/promise';
import type pg from 'pg';
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
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { relayOnce } from '../support/relay.js';
import { scratchDir } from '../support/points.js';
import { findPostgres, newPool, scratchSchema } from '../support/postgres.js';
import { payment, paymentEnvelope, paymentEvents, type PaymentSucceeded } from '../support/points.js';

const postgres = await findPostgres();
const mysqlServer = await mysqlService();

type PgDb = NodePgDatabase & { $client: pg.Pool };
type PgTx = Parameters<Parameters<PgDb['transaction']>[0]>[0];
type MysqlDb = MySql2Database & { $client: mysql.Pool };
type MysqlTx = Parameters<Parameters<MysqlDb['transaction']>[0]>[0];
type SqliteDb = BetterSQLite3Database & { $client: Database.Database };

/** One database with a points table, a Drizzle database on it and a ledger through Drizzle. */
interface World<Tx extends DrizzleTransactionLike, Db extends DrizzleLike<Tx>> {
  readonly db: Db;
  readonly ledger: BridgedLedger<Tx>;
  /** Adds the payment's points through `db`: the claim's transaction when `db` is ctx.tx. */
  readonly addPoints: (db: Tx | Db, event: PaymentSucceeded) => Promise<void>;
  /** Where this world's outbox lives. */
  readonly outbox: { readonly table: string; readonly schema?: string };
  /** The business keys of the outbox rows, in order. */
  readonly outboxKeys: () => Promise<string[]>;
  readonly balances: () => Promise<Record<string, number>>;
  readonly close: () => Promise<void>;
}

/** Publishes what `outbox` holds once through a relay on `database`; answers the keys sent. */
const byUser = (rows: readonly { userId: string; balance: number }[]): Record<string, number> =>
  Object.fromEntries(rows.map((r) => [r.userId, r.balance]));

async function postgresWorld(): Promise<World<PgTx, PgDb>> {
  const pool = newPool(postgres.url, 6);
  const db = drizzlePg(pool);
  const schema = scratchSchema('oncemq_drizzlep');
  await db.execute(sql.raw(`CREATE SCHEMA "${schema}"`));
  await db.execute(
    sql.raw(`CREATE TABLE "${schema}".points (user_id text PRIMARY KEY, balance integer NOT NULL)`),
  );
  const points = pgSchema(schema).table('points', {
    userId: pgText('user_id').primaryKey(),
    balance: pgInteger('balance').notNull(),
  });
  const ledger = drizzleLedger(db, { schema });
  return {
    db,
    ledger,
    addPoints: async (tx, event) => {
      await tx
        .insert(points)
        .values({ userId: event.userId, balance: event.amount })
        .onConflictDoUpdate({
          target: points.userId,
          set: { balance: sql`${points.balance} + ${event.amount}` },
        });
    },
    outbox: { table: 'oncemq_outbox', schema },
    outboxKeys: async () => {
      const { rows } = await db.execute<{ business_key: string }>(
        sql.raw(`SELECT business_key FROM "${schema}".oncemq_outbox ORDER BY id`),
      );
      return rows.map((r) => r.business_key);
    },
    balances: async () => byUser(await db.select().from(points).orderBy(asc(points.userId))),
    close: async () => {
      await ledger.close();
      await db.execute(sql.raw(`DROP SCHEMA "${schema}" CASCADE`));
      await pool.end();
    },
  };
}

async function mysqlWorld(): Promise<World<MysqlTx, MysqlDb>> {
  const pool = mysql.createPool({ uri: mysqlServer.url, connectionLimit: 6 });
  const db = drizzleMysql(pool);
  const table = uniqueTable('drizzlep');
  await db.execute(
    sql.raw(`CREATE TABLE \`${table}_points\` (user_id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL)`),
  );
  const points = mysqlTable(`${table}_points`, {
    userId: varchar('user_id', { length: 64 }).primaryKey(),
    balance: int('balance').notNull(),
  });
  const ledger = drizzleLedger(db, { table });
  return {
    db,
    ledger,
    addPoints: async (tx, event) => {
      await tx
        .insert(points)
        .values({ userId: event.userId, balance: event.amount })
        .onDuplicateKeyUpdate({ set: { balance: sql`${points.balance} + ${event.amount}` } });
    },
    outbox: { table: `${table}_ob` },
    outboxKeys: async () => {
      const [rows] = await pool.query(`SELECT business_key FROM \`${table}_ob\` ORDER BY id`);
      return (rows as { business_key: string }[]).map((r) => r.business_key);
    },
    balances: async () => byUser(await db.select().from(points).orderBy(asc(points.userId))),
    close: async () => {
      await ledger.close();
      for (const name of [`${table}_points`, table, `${table}_schema`, `${table}_ob`, `${table}_ob_keys`]) {
        await db.execute(sql.raw(`DROP TABLE IF EXISTS \`${name}\``));
      }
      await pool.end();
    },
  };
}

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

describe('a pipeline on Drizzle (SQLite, better-sqlite3)', () => {
  const points = sqliteTable('points', {
    userId: sqliteText('user_id').primaryKey(),
    balance: sqliteInteger('balance').notNull(),
  });
  const addPoints = (db: SqliteDb, event: PaymentSucceeded): void => {
    db.insert(points)
      .values({ userId: event.userId, balance: event.amount })
      .onConflictDoUpdate({
        target: points.userId,
        set: { balance: sql`${points.balance} + ${event.amount}` },
      })
      .run();
  };

  let scratch: ReturnType<typeof scratchDir>;
  let path: string;
  let db: SqliteDb;
  let ledger: DrizzleSqliteLedger<SqliteDb>;
  /** Reads through a connection of its own: only committed rows. */
  let reader: SqliteDb;
  const balances = (): Record<string, number> =>
    byUser(reader.select().from(points).orderBy(asc(points.userId)).all());

  beforeEach(async () => {
    scratch = scratchDir();
    path = join(scratch.dir, 'app.db');
    db = drizzleSqlite(new Database(path, { timeout: 5000 }));
    db.$client.pragma('journal_mode = WAL');
    db.run(sql`CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)`);
    reader = drizzleSqlite(new Database(path, { readonly: true }));
    ledger = drizzleLedger(db);
    await ledger.init();
  });
  afterEach(async () => {
    await ledger.close();
    reader.$client.close();
    db.$client.close();
    scratch.remove();
  });

  const config = (handler: PipelineConfig<SqliteDb, PaymentSucceeded>['handler']) => ({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler,
  });

  it('hands the handler the Drizzle db inside the claim’s transaction and applies each event once however many copies arrive', async () => {
    const seen: boolean[] = [];
    const pipeline = createPipeline<SqliteDb, PaymentSucceeded>(
      config((event, ctx) => {
        seen.push(ctx.tx === db && ctx.tx.$client.inTransaction);
        addPoints(ctx.tx, event);
      }),
    );
    const events = paymentEvents(20);
    const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
    const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
    expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
    expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
    expect(seen).toEqual(Array.from({ length: 20 }, () => true));
    expect(Object.values(balances()).reduce((a, b) => a + b, 0)).toBe(20 * 100);
  });

  it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
    let fail = true;
    const pipeline = createPipeline<SqliteDb, PaymentSucceeded>(
      config(async (event, ctx) => {
        addPoints(ctx.tx, event);
        await new Promise((resolve) => setImmediate(resolve));
        if (fail) throw new Error('downstream refused');
      }),
    );
    const event = payment(7);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    expect(balances()).toEqual({});
    fail = false;
    expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('runs a synchronous Drizzle transaction of the handler as a savepoint of the claim’s: it rolls back with the claim', async () => {
    let fail = true;
    const pipeline = createPipeline<SqliteDb, PaymentSucceeded>(
      config((event, ctx) => {
        ctx.tx.transaction((tx) => {
          tx.insert(points).values({ userId: event.userId, balance: event.amount }).run();
        });
        if (fail) throw new Error('downstream refused');
      }),
    );
    const event = payment(4);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    expect(balances()).toEqual({});
    fail = false;
    expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('commits the application’s own writes with a claim in the work of ledger.transaction, and rolls them back with it', async () => {
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
      ledger.transaction(request, (tx) => {
        addPoints(tx, event);
        throw new Error('the application rolls back');
      }),
    ).rejects.toThrow('the application rolls back');
    expect(await ledger.get('points', event.eventId)).toBeUndefined();
    expect(balances()).toEqual({});
    const won = await ledger.transaction(request, (tx) => {
      addPoints(tx, event);
      return null;
    });
    expect(won.status).toBe('acquired');
    expect((await ledger.transaction(request, () => null)).status).toBe('duplicate');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('writes outbox messages through ctx.tx in the claim’s transaction, relays them from a connection of its own, and refuses the db outside one and a synchronous transaction', async () => {
    const outbox = createOutbox({ ledger });
    const relayDb = new Database(path, { timeout: 5000 });
    try {
      await outbox.migrate(relayDb);
      const keys = () =>
        (
          relayDb.prepare('SELECT business_key FROM oncemq_outbox ORDER BY id').all() as {
            business_key: string;
          }[]
        ).map((r) => r.business_key);
      let fail = true;
      const pipeline = createPipeline<SqliteDb, PaymentSucceeded>(
        config(async (event, ctx) => {
          addPoints(ctx.tx, event);
          await outbox.add(ctx.tx, { topic: 'points-added', key: event.eventId, body: { n: 1 } });
          if (fail) throw new Error('downstream refused');
        }),
      );
      const event = payment(5);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(keys()).toEqual([]);
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(keys()).toEqual([event.eventId]);

      await expect(outbox.add(db, { topic: 't', key: 'outside', body: {} })).rejects.toThrow(
        /no transaction is open on the database/,
      );
      const inSync = await ledger.transaction(
        {
          group: 'points',
          key: 'sync',
          fingerprint: null,
          brokerId: 'b',
          topic: 'payments',
          leaseMs: 30_000,
        },
        async (tx) => {
          let added: Promise<unknown> = Promise.resolve();
          tx.transaction((inner) => {
            added = outbox.add(inner as unknown as SqliteDb, { topic: 't', key: 'sync', body: {} });
          });
          await expect(added).rejects.toThrow(/not a transaction of db\.transaction\(\)/);
          return null;
        },
      );
      expect(inSync.status).toBe('acquired');
      const other = drizzleSqlite(relayDb);
      await expect(
        ledger.transaction(
          {
            group: 'points',
            key: 'other',
            fingerprint: null,
            brokerId: 'b',
            topic: 'payments',
            leaseMs: 30_000,
          },
          () => outbox.add(other, { topic: 't', key: 'other', body: {} }).then(() => null),
        ),
      ).rejects.toThrow(/the Drizzle database the ledger was built on/);
      expect(keys()).toEqual([event.eventId]);
      expect(await relayOnce(outbox, relayDb)).toEqual([event.eventId]);
    } finally {
      relayDb.close();
    }
  });

  it('passes the rollback check when the handler writes through ctx.tx', async () => {
    const report = await checkRollback<SqliteDb, PaymentSucceeded>({
      pipeline: config(function addPointsInTheClaim(event, ctx) {
        addPoints(ctx.tx, event);
      }),
      envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
      observe: () => balances(),
    });
    expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
    expect(report.afterCommit).not.toEqual({});
  });
});
