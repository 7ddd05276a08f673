/** The part of a better-sqlite3 statement oncemq calls. */
export interface SqliteStatementLike {
  run(...params: unknown[]): { changes: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** The part of a better-sqlite3 `Database` oncemq calls. */
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  exec(sql: string): unknown;
  readonly inTransaction: boolean;
  readonly memory?: boolean;
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
