import { ConfigError } from '../core/errors.js';
import type { SqlLedgerConfig } from '../ledger/sql-ledger-config.js';
import type { SqliteConnectionSource } from '../ledger/sqlite/sqlite-connection-source.js';
import { isSqliteDatabase, type SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';
import {
  kyselyProbeSql,
  type KyselyLike,
  type KyselyQueryableLike,
  type KyselyTransactionLike,
} from './kysely-bridge.js';
import { openTransaction, type SqliteOrm } from './sqlite-orm-ledger.js';

/** Configuration of a ledger on a Kysely instance with SQLite's `SqliteDialect` (better-sqlite3). */
export interface KyselySqliteLedgerConfig extends SqlLedgerConfig {
  /**
   * The better-sqlite3 `Database` given to the `SqliteDialect` of the Kysely instance (`new
   * SqliteDialect({ database })`): Kysely keeps it private, so it is passed again. The ledger's
   * statements run on it inside Kysely's transactions; it is checked to be the dialect's own.
   */
  readonly database: SqliteDatabaseLike;
}

/** The part of a Kysely instance on SQLite oncemq calls beyond the PostgreSQL and MySQL bridges. */
export interface KyselySqliteLike<
  Tx extends KyselyTransactionLike = KyselyTransactionLike,
> extends KyselyLike<Tx> {
  /** Kysely's connection builder (`db.connection()`): the one connection, held until work settles. */
  connection(): {
    /** Runs `work` while the instance's connection is held for it: no other query of the instance runs meanwhile. */
    execute<T>(work: () => Promise<T>): Promise<T>;
  };
}

/**
 * Whether `db` writes SQLite's SQL (`"t"` and `?` placeholders, no `$n`): told from a compiled query,
 * without connecting. Which driver is under it is checked when the ledger first uses the connection.
 */
export function writesSqlite(db: KyselyQueryableLike): boolean {
  const sql = kyselyProbeSql(db);
  return sql.includes('"oncemq_probe"') && sql.endsWith('?');
}

const TRX = 'this Kysely transaction';

/** Refuses what is not a Kysely transaction: the Kysely instance's queries wait for the connection the claim holds. */
function checkTrx(trx: unknown): void {
  if ((trx as { isTransaction?: unknown } | null)?.isTransaction !== true) {
    throw new ConfigError(
      'tx',
      'expected a Kysely transaction (the `trx` of db.transaction().execute(), or ctx.tx), not the Kysely ' +
        'instance: its queries wait for the one connection the claim’s transaction holds',
    );
  }
}

/** The refusal of a `database` that is not the one under the Kysely instance. */
function notUnderKysely(): ConfigError {
  return new ConfigError(
    'database',
    'this better-sqlite3 Database is not the one under the Kysely instance: give the `database` of its SqliteDialect',
  );
}

/**
 * Checks that `database` is the dialect's own: a transaction Kysely opens must be open on it. Answers
 * false when that cannot be told (a transaction is already open on it).
 */
async function checkDatabase<Tx extends KyselyTransactionLike>(
  db: KyselyLike<Tx>,
  database: SqliteDatabaseLike,
): Promise<boolean> {
  if (database.inTransaction) return false;
  if (!(await db.transaction().execute(() => Promise.resolve(database.inTransaction))))
    throw notUnderKysely();
  return true;
}

/**
 * The better-sqlite3 `database` under a Kysely instance with `SqliteDialect`, lent to the SQLite
 * ledger: every operation holds Kysely's one connection (`db.connection()`), so no query of the
 * application runs in the middle of it, and each transactional claim is one
 * `db.transaction().execute()` (Kysely's `begin`), whose `trx` is the handler's `ctx.tx`; a Kysely
 * transaction on SQLite is the transaction of `database`.
 */
export function kyselySqlite<Tx extends KyselyTransactionLike>(
  db: KyselySqliteLike<Tx>,
  database: SqliteDatabaseLike,
): SqliteOrm<Tx> {
  let checked = false;
  const source: SqliteConnectionSource<SqliteDatabaseLike, Tx> = {
    memory: database.memory === true,
    async hold(work) {
      checked ||= await checkDatabase(db, database);
      return db.connection().execute(async () => work(database));
    },
    transaction: (work) =>
      db.transaction().execute(async (trx) => {
        if (!database.inTransaction) throw notUnderKysely();
        return work(database, trx);
      }),
    database(tx) {
      checkTrx(tx);
      return openTransaction(database, TRX);
    },
  };
  return { source, checkTransaction: (tx) => void source.database(tx) };
}

/**
 * Refuses, for a ledger on SQLite through Kysely, a transaction instead of the instance, a missing or
 * wrong `database`, and an instance that does not use `SqliteDialect`.
 */
export function checkKyselySqlite<Tx extends KyselyTransactionLike>(
  db: KyselyLike<Tx>,
  database: unknown,
): KyselySqliteLike<Tx> {
  if (db.isTransaction) {
    throw new ConfigError(
      'db',
      'expected the Kysely instance, not a transaction: to claim inside a transaction of yours, ' +
        'build the ledger on the instance and call ledger.join(trx)',
    );
  }
  if (!isSqliteDatabase(database)) {
    throw new ConfigError(
      'database',
      'a Kysely instance on SQLite needs the better-sqlite3 Database given to its SqliteDialect: kyselyLedger(db, { database })',
    );
  }
  if (!writesSqlite(db) || typeof (db as Partial<KyselySqliteLike>).connection !== 'function') {
    throw new ConfigError(
      'db',
      'a better-sqlite3 database was given, but this Kysely instance does not use SqliteDialect',
    );
  }
  return db as KyselySqliteLike<Tx>;
}
