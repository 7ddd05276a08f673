import type { SqliteDatabaseLike } from '../../sql/sqlite-like.js';

export type { SqliteDatabaseLike, SqliteStatementLike } from '../../sql/sqlite-like.js';

/**
 * What the handler receives for the database, when that is not the database itself: a query builder
 * or ORM built on the same better-sqlite3 connection (a Drizzle database), whose writes therefore run
 * inside the claim's transaction.
 */
export interface SqliteHandle<Db extends SqliteDatabaseLike, Tx> {
  /** The handler's `ctx.tx` for the ledger's open database. */
  of(database: Db): Tx;
  /**
   * The database under `tx`, for `ledger.dialect` (`transition()`, `outbox.add()`); throws a
   * ConfigError for what is not such a handle.
   */
  database(tx: Tx): SqliteDatabaseLike;
}

/** A better-sqlite3 `Database` itself: what the relay and `outbox.migrate()` run on, a connection of their own. */
export function isSqliteDatabase(value: unknown): value is SqliteDatabaseLike {
  const shape = value as Partial<SqliteDatabaseLike> | null;
  return (
    typeof shape?.prepare === 'function' &&
    typeof shape.exec === 'function' &&
    typeof shape.inTransaction === 'boolean'
  );
}
