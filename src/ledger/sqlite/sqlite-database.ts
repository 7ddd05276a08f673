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
