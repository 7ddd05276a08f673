import type Database from 'better-sqlite3';
import { asc, sql } from 'drizzle-orm';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleMysql, type MySql2Database } from 'drizzle-orm/mysql2';
import { int, mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { integer as pgInteger, pgSchema, text as pgText } from 'drizzle-orm/pg-core';
import mysql from 'mysql2/promise';
import type pg from 'pg';
import {
  drizzleLedger,
  type BridgedLedger,
  type DrizzleLike,
  type DrizzleTransactionLike,
} from 'oncemq/drizzle';
import { mysqlService, uniqueTable } from './mysql.js';
import type { PaymentSucceeded } from './points.js';
import { findPostgres, newPool, scratchSchema } from './postgres.js';

export const postgres = await findPostgres();
export const mysqlServer = await mysqlService();

export type PgDb = NodePgDatabase & { $client: pg.Pool };
export type PgTx = Parameters<Parameters<PgDb['transaction']>[0]>[0];
export type MysqlDb = MySql2Database & { $client: mysql.Pool };
export type MysqlTx = Parameters<Parameters<MysqlDb['transaction']>[0]>[0];
export type SqliteDb = BetterSQLite3Database & { $client: Database.Database };

/** One database with a points table, a Drizzle database on it and a ledger through Drizzle. */
export interface World<Tx extends DrizzleTransactionLike, Db extends DrizzleLike<Tx>> {
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

/** The balances of `rows`, by user. */
export const byUser = (rows: readonly { userId: string; balance: number }[]): Record<string, number> =>
  Object.fromEntries(rows.map((r) => [r.userId, r.balance]));

export async function postgresWorld(): Promise<World<PgTx, PgDb>> {
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

export async function mysqlWorld(): Promise<World<MysqlTx, MysqlDb>> {
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
