import { join } from 'node:path';
import Database from 'better-sqlite3';
import knexFactory, { type Knex } from 'knex';
import type { OutboxDatabase } from 'oncemq';
import { knexBridge, knexLedger, type BridgedLedger } from 'oncemq/knex';
import { mysqlService, uniqueTable } from './mysql.js';
import { findPostgres, scratchSchema } from './postgres.js';
import { scratchDir, type PaymentSucceeded } from './points.js';
import { knexOnSqlite } from './sqlite-builders.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

export interface World {
  readonly knex: Knex;
  readonly ledger: BridgedLedger<Knex.Transaction>;
  /** The points table, qualified for this world. */
  readonly points: string;
  /** Where this world's outbox lives. */
  readonly outbox: { readonly table: string; readonly schema?: string };
  /** Where the relay and outbox.migrate() open their own transactions. */
  readonly outboxDatabase: OutboxDatabase;
  readonly balances: () => Promise<Record<string, number>>;
  readonly close: () => Promise<void>;
}

async function postgresWorld(): Promise<World> {
  const knex = knexFactory({ client: 'pg', connection: postgres.url, pool: { min: 0, max: 6 } });
  const schema = scratchSchema('oncemq_knexp');
  await knex.raw(`CREATE SCHEMA "${schema}"`);
  await knex.schema.withSchema(schema).createTable('points', (t) => {
    t.text('user_id').primary();
    t.integer('balance').notNullable();
  });
  return world(
    knex,
    knexLedger(knex, { schema }),
    `${schema}.points`,
    { table: 'oncemq_outbox', schema },
    async () => {
      await knex.raw(`DROP SCHEMA "${schema}" CASCADE`);
    },
  );
}

/** A SQLite file through Knex's better-sqlite3 client; the relay has a connection of its own. */
async function sqliteWorld(): Promise<World> {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'app.db');
  const knex = knexOnSqlite(path);
  await knex.schema.createTable('points', (t) => {
    t.text('user_id').primary();
    t.integer('balance').notNullable();
  });
  const relayDb = new Database(path, { timeout: 5000 });
  const drop = (): Promise<void> => {
    relayDb.close();
    scratch.remove();
    return Promise.resolve();
  };
  return world(knex, knexLedger(knex), 'points', { table: 'oncemq_outbox' }, drop, relayDb);
}

async function mysqlWorld(): Promise<World> {
  const knex = knexFactory({ client: 'mysql2', connection: mysql.url, pool: { min: 0, max: 6 } });
  const table = uniqueTable('knexp');
  await knex.schema.createTable(`${table}_points`, (t) => {
    t.string('user_id', 64).primary();
    t.integer('balance').notNullable();
  });
  return world(knex, knexLedger(knex, { table }), `${table}_points`, { table: `${table}_ob` }, async () => {
    for (const name of [`${table}_points`, table, `${table}_schema`, `${table}_ob`, `${table}_ob_keys`]) {
      await knex.schema.dropTableIfExists(name);
    }
  });
}

/** The options that put a second ledger on this world's table. */
export function ledgerPlace(w: World): { schema?: string; table?: string } {
  return w.outbox.schema === undefined
    ? { table: w.outbox.table.replace(/_ob$/, '') }
    : { schema: w.outbox.schema };
}

function world(
  knex: Knex,
  ledger: BridgedLedger<Knex.Transaction>,
  points: string,
  outbox: World['outbox'],
  drop: () => Promise<void>,
  outboxDatabase: OutboxDatabase = knexBridge(knex),
): World {
  return {
    knex,
    ledger,
    points,
    outbox,
    outboxDatabase,
    balances: async () => {
      const rows = await knex<{ user_id: string; balance: number | string }>(points)
        .select()
        .orderBy('user_id');
      return Object.fromEntries(rows.map((r) => [r.user_id, Number(r.balance)]));
    },
    close: async () => {
      await ledger.close();
      await drop();
      await knex.destroy();
    },
  };
}

/** Adds the payment's points through `db`: the claim's transaction when `db` is ctx.tx. */
export async function addPoints(
  db: Knex | Knex.Transaction,
  points: string,
  event: PaymentSucceeded,
): Promise<void> {
  await db(points)
    .insert({ user_id: event.userId, balance: event.amount })
    .onConflict('user_id')
    .merge({ balance: db.raw('?? + ?', [`${points.split('.').pop() ?? points}.balance`, event.amount]) });
}

/** Each database a Knex pipeline runs on, how to open its world, and whether the machine has it. */
export const KNEX_DATABASES = [
  ['PostgreSQL', postgresWorld, postgres.available],
  ['MariaDB', mysqlWorld, mysql.available],
  ['SQLite', sqliteWorld, true],
] as const;
