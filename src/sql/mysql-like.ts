/**
 * The part of mysql2/promise oncemq calls, typed by what it calls so that mysql2 stays an optional
 * peer: the MySQL ledger, the outbox and the ORM bridges all take these shapes.
 */

/**
 * The part of a mysql2/promise connection oncemq calls: `query` for statements without values
 * (transaction control, DDL) and `execute` (server-side prepared statements, so values are never
 * escaped into SQL text, whatever the session's sql_mode) for everything else.
 */
export interface MysqlConnectionLike {
  /** mysql2 `query(sql)`: a statement without values (transaction control, DDL). */
  query(sql: string): Promise<readonly [unknown, unknown]>;
  /** mysql2 `execute(sql, values)`: a server-side prepared statement with bound values. */
  execute(sql: string, values?: MysqlValue[]): Promise<readonly [unknown, unknown]>;
}

/** A value bound to a statement parameter. */
export type MysqlValue = string | number | bigint | boolean | null | Date | Buffer;

/** A connection taken from a pool; oncemq releases it when its transaction ends. */
export interface MysqlPoolConnectionLike extends MysqlConnectionLike {
  /** Returns the connection to its pool. */
  release(): void;
}

/** The part of a mysql2/promise `Pool` oncemq calls. */
export interface MysqlPoolLike<Conn extends MysqlConnectionLike = MysqlConnectionLike> {
  /** Takes a connection from the pool for one transaction; oncemq releases it when the transaction ends. */
  getConnection(): Promise<
    Conn & {
      /** Returns the connection to its pool. */
      release(): void;
    }
  >;
  /** Runs one prepared statement on any connection of the pool (reads and single-statement writes). */
  execute(sql: string, values?: MysqlValue[]): Promise<readonly [unknown, unknown]>;
}
