/**
 * The part of better-sqlite3 oncemq calls, typed by what it calls so that better-sqlite3 stays an
 * optional peer: the SQLite ledger, the outbox and the ORM bridges all take these shapes.
 */

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
