import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, type Transaction } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { ConfigError, createPipeline } from 'oncemq';
import { kyselyBridge, kyselyLedger, type BridgedLedger } from 'oncemq/kysely';

interface Db {
  points: { user_id: string; balance: number };
}

/** Kysely instances that never connect: telling the database only compiles a query. */
const unused = 'postgres://nobody@127.0.0.1:1/none';

describe('kyselyBridge', () => {
  it('tells PostgreSQL and MySQL from the SQL the dialect writes, without connecting', async () => {
    const pool = new pg.Pool({ connectionString: unused });
    const mysqlPool = createPool({ uri: 'mysql://nobody@127.0.0.1:1/none' });
    const onPg = new Kysely<Db>({ dialect: new PostgresDialect({ pool }) });
    const onMysql = new Kysely<Db>({ dialect: new MysqlDialect({ pool: mysqlPool }) });
    expect(kyselyBridge(onPg).database).toBe('postgres');
    expect(kyselyBridge(onMysql).database).toBe('mysql');
    expect(kyselyLedger(onPg).name).toBe('postgres');
    expect(kyselyLedger(onMysql).name).toBe('mysql');
    expect(pool.totalCount).toBe(0);
    await pool.end();
    await new Promise<void>((resolve) => mysqlPool.end(() => resolve()));
  });

  it('builds the SQLite ledger on a SQLite Kysely given its better-sqlite3 database, without touching it, and refuses one without', () => {
    const database = new Database(':memory:');
    const onSqlite = new Kysely<Db>({ dialect: new SqliteDialect({ database }) });
    const ledger = kyselyLedger(onSqlite, { database });
    expect(ledger.name).toBe('sqlite');
    expect(ledger.capabilities.concurrentConnections).toBe(false); // in memory
    expectTypeOf(ledger).toEqualTypeOf<BridgedLedger<Transaction<Db>>>();
    expect(database.prepare('SELECT COUNT(*) AS n FROM sqlite_master').get()).toEqual({ n: 0 });
    expect(() => kyselyLedger(onSqlite)).toThrow(ConfigError);
    expect(() => kyselyLedger(onSqlite)).toThrow(
      /needs the better-sqlite3 Database given to its SqliteDialect/,
    );
    expect(() => kyselyBridge(onSqlite)).toThrow(/SQLite takes no bridge/);
    database.close();
  });

  it('refuses what is not a Kysely instance', () => {
    const fake = { executeQuery: () => Promise.resolve({ rows: [] }), isTransaction: false };
    expect(() => kyselyBridge(fake as never)).toThrow(/has no oncemq ledger through Kysely/);
  });

  it('refuses options of the other database', () => {
    const onPg = new Kysely<Db>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: unused }) }),
    });
    expect(() => kyselyLedger(onPg, { lockRetries: 2 })).toThrow(
      /lockRetries: is not an option of a postgres ledger/,
    );
  });

  it('types ctx.tx as the Kysely Transaction of the database the instance was typed with', () => {
    const db = new Kysely<Db>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: unused }) }),
    });
    const ledger = kyselyLedger(db);
    expectTypeOf(ledger).toEqualTypeOf<BridgedLedger<Transaction<Db>>>();
    createPipeline<Transaction<Db>, { userId: string }>({
      ledger,
      group: 'points',
      key: { jsonPath: 'userId' },
      handler: async (event, ctx) => {
        expectTypeOf(ctx.tx).toEqualTypeOf<Transaction<Db>>();
        await ctx.tx.insertInto('points').values({ user_id: event.userId, balance: 100 }).execute();
      },
    });
  });
});
