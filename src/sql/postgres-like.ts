/**
 * The part of pg (node-postgres) oncemq calls, typed by what it calls so that pg stays an optional
 * peer: the PostgreSQL ledger, the outbox and the ORM bridges all take these shapes.
 */

/** What oncemq reads from a pg query result. */
export interface PgQueryResultLike {
  /** The rows returned, as pg parses them. */
  readonly rows: unknown[];
  /** Rows the statement touched; `null` for statements that report none. */
  readonly rowCount: number | null;
  /** The command tag: `COMMIT` answers `ROLLBACK` when the transaction had been aborted. */
  readonly command?: string;
}

/** The part of a pg `Client` / `PoolClient` oncemq calls: a connection, possibly inside the caller's transaction. */
export interface PgClientLike {
  /** pg `query(text, values)`: runs a statement with bound values. */
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  /** pg `query({ name, text, values })`: a named statement, prepared once per connection. */
  query(config: {
    readonly name?: string;
    readonly text: string;
    readonly values?: unknown[];
  }): Promise<PgQueryResultLike>;
}

/** A client checked out of a pool. `release(error)` destroys it instead of returning it. */
export interface PgPoolClientLike extends PgClientLike {
  /** Returns the client to its pool; with an error, destroys it instead (its connection is unusable). */
  release(error?: Error | boolean): void;
  /** pg emits `error` on a checked-out client whose connection dies between two queries. */
  on?(event: 'error', listener: (error: Error) => void): unknown;
  /** Removes the `error` listener added while the client was checked out. */
  removeListener?(event: 'error', listener: (error: Error) => void): unknown;
}

/** The part of a pg `Pool` oncemq calls. */
export interface PgPoolLike extends PgClientLike {
  /** Checks a client out of the pool, for a transaction. */
  connect(): Promise<PgPoolClientLike>;
  /** Ends the pool; called on close() only for the pool oncemq created from `connectionString`. */
  end?(): Promise<void>;
}
