import { entityKind, sql, type SQLWrapper } from 'drizzle-orm';
import { ConfigError } from '../core/errors.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import type { PgClientLike, PgQueryResultLike } from '../ledger/postgres/postgres-client.js';
import { drizzleStatement } from './drizzle-statement.js';
import { mysqlShim, pgShim } from './shims.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import { toolBridge } from './tool-bridge.js';

/** The part of a Drizzle database or transaction on PostgreSQL or MySQL oncemq calls: raw statements. */
export interface DrizzleQueryableLike {
  /** Runs a raw statement; node-postgres answers pg's result, mysql2 its `[result, fields]`. */
  execute(query: SQLWrapper): PromiseLike<unknown>;
}

/** The part of a Drizzle transaction (the `tx` of `db.transaction()`) on PostgreSQL or MySQL. */
export interface DrizzleTransactionLike extends DrizzleQueryableLike {
  /** Present on a transaction, absent on the database. */
  rollback(): never;
}

/** The part of a Drizzle database on PostgreSQL (node-postgres) or MySQL (mysql2) oncemq calls. */
export interface DrizzleLike<
  Tx extends DrizzleTransactionLike = DrizzleTransactionLike,
> extends DrizzleQueryableLike {
  /** Runs `work` in a new transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
}

/**
 * The Drizzle entity kinds of `value`'s class and its ancestors (`NodePgTransaction`,
 * `PgTransaction`, `PgDatabase`): what Drizzle's own `is()` compares, so a second copy of
 * drizzle-orm in node_modules is recognised too, where `instanceof` would not be.
 */
export function drizzleKinds(value: unknown): readonly string[] {
  const kinds: string[] = [];
  if (typeof value !== 'object' || value === null) return kinds;
  let type: unknown = (Object.getPrototypeOf(value) as { constructor?: unknown } | null)?.constructor;
  while (typeof type === 'function') {
    const kind = (type as unknown as Record<symbol, unknown>)[entityKind];
    if (typeof kind === 'string' && !kinds.includes(kind)) kinds.push(kind);
    type = Object.getPrototypeOf(type);
  }
  return kinds;
}

/** The Drizzle drivers with an oncemq ledger, by the entity kind of their database. */
const DRIVERS: Readonly<Record<string, 'postgres' | 'mysql' | 'sqlite'>> = {
  NodePgDatabase: 'postgres',
  MySql2Database: 'mysql',
  BetterSQLite3Database: 'sqlite',
};

const TRANSACTIONS = ['PgTransaction', 'MySqlTransaction', 'SQLiteTransaction'];

/**
 * Which database a Drizzle database talks to: `drizzle-orm/node-postgres`, `drizzle-orm/mysql2` or
 * `drizzle-orm/better-sqlite3`. A transaction, another driver or anything else is refused.
 */
export function drizzleDatabase(db: unknown): 'postgres' | 'mysql' | 'sqlite' {
  const kinds = drizzleKinds(db);
  for (const kind of kinds) {
    const database = DRIVERS[kind];
    if (database !== undefined) return database;
  }
  if (kinds.some((kind) => TRANSACTIONS.includes(kind))) {
    throw new ConfigError(
      'db',
      'expected the Drizzle database (what drizzle() answers), not a transaction: the ledger opens its own ' +
        'with db.transaction(); to claim inside yours, use ledger.join(tx)',
    );
  }
  const what = kinds[0] === undefined ? 'not a Drizzle database' : `a Drizzle ${kinds[0]}`;
  throw new ConfigError(
    'db',
    `${what}: oncemq/drizzle takes a database of drizzle-orm/node-postgres, drizzle-orm/mysql2 or ` +
      'drizzle-orm/better-sqlite3 (withReplicas: pass db.$primary)',
  );
}

/** Refuses what is not a Drizzle transaction of `kind`: the database's writes would escape the claim's transaction. */
function checkTransaction<Tx>(tx: Tx, kind: string): Tx {
  if (!drizzleKinds(tx).includes(kind)) {
    throw new ConfigError(
      'tx',
      'expected a Drizzle transaction (the tx of db.transaction(), or ctx.tx), not the database: its writes ' +
        'would run on another connection of the pool, outside the claim’s transaction',
    );
  }
  return tx;
}

function pgOver(target: DrizzleQueryableLike): PgClientLike {
  return pgShim(
    async (text, values) =>
      (await target.execute(drizzleStatement(text, values, 'numbered'))) as PgQueryResultLike,
  );
}

function mysqlOver(target: DrizzleQueryableLike): MysqlConnectionLike {
  return mysqlShim(
    async (text, values) =>
      (await target.execute(
        values === undefined ? sql.raw(text) : drizzleStatement(text, values, 'ordered'),
      )) as readonly [unknown, unknown],
  );
}

/**
 * The bridge of a Drizzle database on PostgreSQL (`drizzle-orm/node-postgres`) or MySQL/MariaDB
 * (`drizzle-orm/mysql2`): transactions open with `db.transaction()`, the handler gets its `tx`, and
 * the ledger's statements run on it through `tx.execute()` (node-postgres answers pg's result,
 * mysql2 its `[result, fields]`). Each transaction's connection shim is made once and kept with it.
 * On better-sqlite3 Drizzle's transactions are synchronous: use `drizzleLedger(db)`, which builds on
 * the SQLite ledger's own.
 */
export function drizzleBridge<Tx extends DrizzleTransactionLike>(
  db: DrizzleLike<Tx>,
): SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> {
  const database = drizzleDatabase(db);
  if (database === 'sqlite') {
    throw new ConfigError(
      'db',
      'Drizzle’s better-sqlite3 transactions are synchronous and cannot await a claim: use drizzleLedger(db), ' +
        'whose claims open the transaction on db.$client themselves',
    );
  }
  const over = database === 'postgres' ? pgOver : mysqlOver;
  const kind = database === 'postgres' ? 'PgTransaction' : 'MySqlTransaction';
  return toolBridge<Tx, Tx>({
    database,
    autocommit: over(db),
    open: (work) => db.transaction(work),
    transactionOf: (tx) => checkTransaction(tx, kind),
    over: (tx) => over(tx),
  });
}
