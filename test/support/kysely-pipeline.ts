import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, sql, type KyselyPlugin, type Transaction } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import type { OutboxDatabase } from 'oncemq';
import { kyselyBridge, kyselyLedger, type BridgedLedger } from 'oncemq/kysely';
import { mysqlService, uniqueTable } from './mysql.js';
import { findPostgres, scratchSchema } from './postgres.js';
import { scratchDir, type PaymentSucceeded } from './points.js';
import { kyselyOnSqlite } from './sqlite-builders.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** The points table, under the name each world gives it. */
export type PointsDb = Record<string, { user_id: string; balance: number }>;
export type Db = Kysely<PointsDb>;
export type Trx = Transaction<PointsDb>;

export interface World {
  readonly db: Db;
  readonly ledger: BridgedLedger<Trx>;
  /** Adds the payment's points through `db`: the claim's transaction when `db` is ctx.tx. */
  readonly addPoints: (db: Db, event: PaymentSucceeded) => Promise<unknown>;
  /** Where this world's outbox lives. */
  readonly outbox: { readonly table: string; readonly schema?: string };
  /** Where the relay and outbox.migrate() open their own transactions. */
  readonly outboxDatabase: OutboxDatabase;
  readonly pending: () => Promise<string[]>;
  readonly balances: () => Promise<Record<string, number>>;
  /** Another Kysely instance on the same database, with `plugins`; the caller destroys it. */
  readonly connect: (plugins: KyselyPlugin[]) => Db;
  /** A ledger on `db` in this world's namespace. */
  readonly ledgerOn: (db: Db) => BridgedLedger<Trx>;
  readonly close: () => Promise<void>;
}

function postgresDb(max: number, plugins: KyselyPlugin[]): Db {
  const pool = new pg.Pool({ connectionString: postgres.url, max });
  pool.on('error', () => undefined);
  return new Kysely<PointsDb>({ dialect: new PostgresDialect({ pool }), plugins });
}

async function postgresWorld(): Promise<World> {
  const db = postgresDb(6, []);
  const schema = scratchSchema('oncemq_kyselyp');
  await sql`CREATE SCHEMA ${sql.id(schema)}`.execute(db);
  await db.schema
    .withSchema(schema)
    .createTable('points')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('balance', 'integer', (c) => c.notNull())
    .execute();
  const outbox = { table: 'oncemq_outbox', schema };
  return world({
    db,
    ledgerOn: (on) => kyselyLedger(on, { schema }),
    connect: (plugins) => postgresDb(4, plugins),
    addPoints: (on, event) =>
      on
        .withSchema(schema)
        .insertInto('points')
        .values({ user_id: event.userId, balance: event.amount })
        .onConflict((oc) =>
          oc.column('user_id').doUpdateSet((eb) => ({ balance: eb('points.balance', '+', event.amount) })),
        )
        .execute(),
    inNamespace: (on) => on.withSchema(schema),
    points: 'points',
    outbox,
    drop: async () => {
      await sql`DROP SCHEMA ${sql.id(schema)} CASCADE`.execute(db);
    },
  });
}

function mysqlDb(max: number, plugins: KyselyPlugin[]): Db {
  return new Kysely<PointsDb>({
    dialect: new MysqlDialect({ pool: createPool({ uri: mysql.url, connectionLimit: max }) }),
    plugins,
  });
}

async function mysqlWorld(): Promise<World> {
  const db = mysqlDb(6, []);
  const table = uniqueTable('kyselyp');
  const points = `${table}_points`;
  await db.schema
    .createTable(points)
    .addColumn('user_id', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('balance', 'integer', (c) => c.notNull())
    .execute();
  const outbox = { table: `${table}_ob` };
  return world({
    db,
    ledgerOn: (on) => kyselyLedger(on, { table }),
    connect: (plugins) => mysqlDb(4, plugins),
    addPoints: (on, event) =>
      on
        .insertInto(points)
        .values({ user_id: event.userId, balance: event.amount })
        .onDuplicateKeyUpdate({ balance: sql`balance + ${event.amount}` })
        .execute(),
    inNamespace: (on) => on,
    points,
    outbox,
    drop: async () => {
      for (const name of [points, table, `${table}_schema`, `${table}_ob`, `${table}_ob_keys`]) {
        await db.schema.dropTable(name).ifExists().execute();
      }
    },
  });
}

/**
 * A SQLite file through Kysely's SqliteDialect; every Kysely instance has a better-sqlite3 connection of
 * its own, and the relay one more.
 */
async function sqliteWorld(): Promise<World> {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'app.db');
  const connections = new Map<Db, Database.Database>();
  const connect = (plugins: KyselyPlugin[]): Db => {
    const { db, database } = kyselyOnSqlite<PointsDb>(path, plugins);
    connections.set(db, database);
    return db;
  };
  const db = connect([]);
  await db.schema
    .createTable('points')
    .addColumn('user_id', 'text', (c) => c.primaryKey())
    .addColumn('balance', 'integer', (c) => c.notNull())
    .execute();
  const relayDb = new Database(path, { timeout: 5000 });
  return world({
    db,
    ledgerOn: (on) => {
      const database = connections.get(on);
      if (database === undefined) throw new Error('a Kysely instance of another world');
      return kyselyLedger(on, { database });
    },
    connect,
    addPoints: (on, event) =>
      on
        .insertInto('points')
        .values({ user_id: event.userId, balance: event.amount })
        .onConflict((oc) =>
          oc.column('user_id').doUpdateSet((eb) => ({ balance: eb('points.balance', '+', event.amount) })),
        )
        .execute(),
    inNamespace: (on) => on,
    points: 'points',
    outbox: { table: 'oncemq_outbox' },
    outboxDatabase: relayDb,
    drop: () => {
      relayDb.close();
      scratch.remove();
      return Promise.resolve();
    },
  });
}

function world(parts: {
  db: Db;
  outboxDatabase?: OutboxDatabase;
  ledgerOn: World['ledgerOn'];
  connect: World['connect'];
  addPoints: World['addPoints'];
  /** `db` with this world's schema, if it has one. */
  inNamespace: (db: Db) => Db;
  /** The points table. */
  points: string;
  outbox: World['outbox'];
  drop: () => Promise<void>;
}): World {
  const { db, ledgerOn, connect } = parts;
  const ledger = ledgerOn(db);
  return {
    db,
    ledger,
    ledgerOn,
    connect,
    addPoints: parts.addPoints,
    outbox: parts.outbox,
    outboxDatabase: parts.outboxDatabase ?? kyselyBridge(db),
    pending: async () => {
      const rows = await parts
        .inNamespace(db)
        .selectFrom(parts.outbox.table)
        .select(sql<string>`business_key`.as('key'))
        .orderBy(sql`id`)
        .execute();
      return rows.map((r) => r.key);
    },
    balances: async () => {
      const rows = await parts
        .inNamespace(db)
        .selectFrom(parts.points)
        .select(['user_id', 'balance'])
        .orderBy('user_id')
        .execute();
      return Object.fromEntries(rows.map((r) => [r.user_id, r.balance]));
    },
    close: async () => {
      await ledger.close();
      await parts.drop();
      await db.destroy();
    },
  };
}

/** Each database a Kysely pipeline runs on, how to open its world, and whether the machine has it. */
export const KYSELY_DATABASES = [
  ['PostgreSQL', postgresWorld, postgres.available],
  ['MariaDB', mysqlWorld, mysql.available],
  ['SQLite', sqliteWorld, true],
] as const;
