/** The part of a better-sqlite3 statement oncemq calls. */
export interface SqliteStatementLike {
  /** Runs a write with bound values. */
  run(...params: unknown[]): {
    /** Rows the write changed. */
    changes: number | bigint;
  };
  /** The first row of a read, or `undefined`. */
  get(...params: unknown[]): unknown;
  /** Every row of a read. */
  all(...params: unknown[]): unknown[];
}

/** The part of a better-sqlite3 `Database` oncemq calls. */
export interface SqliteDatabaseLike {
  /** Compiles a statement. */
  prepare(sql: string): SqliteStatementLike;
  /** Runs SQL without values: transaction control, pragmas, DDL. */
  exec(sql: string): unknown;
  /** True inside an open transaction: the ledger then joins it through a savepoint. */
  readonly inTransaction: boolean;
  /** True for an in-memory database: no other connection can reach it (capability `concurrentConnections` is false). */
  readonly memory?: boolean;
  /** Closes the database; called on close() only for a database oncemq opened from a path. */
  close(): unknown;
}

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
