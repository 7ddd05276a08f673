import type { SqlValue } from '../sql/sql-value.js';

export type { SqlValue } from '../sql/sql-value.js';

/**
 * How statements run on one SQL database through the transaction handle `Tx` a handler receives
 * (`ctx.tx`: a pg client, a mysql2 connection, a better-sqlite3 database). Each SQL ledger exposes
 * its dialect as `ledger.dialect`, and helpers that write inside the handler's transaction
 * (`transition()`, the outbox) take it instead of guessing the driver from the shape of `tx`.
 *
 * A dialect holds no connection: one object serves every transaction of its database. Driver
 * errors of `execute` and `query` propagate unchanged, like the caller's own SQL.
 */
export interface SqlDialect<Tx> {
  /** Which database this is, for messages and for choosing DDL: `postgres`, `mysql` (MySQL, MariaDB) or `sqlite`. */
  readonly name: 'postgres' | 'mysql' | 'sqlite';
  /** Appended to a `SELECT` so that it reads the latest committed row under a shared lock (`''` on SQLite, whose writer is alone). */
  readonly lockingRead: string;
  /** Quotes an identifier already checked by `sqlIdentifier()` (`"orders"`, `` `orders` ``). */
  quote(identifier: string): string;
  /** The placeholder of the n-th bound value, from 1 (`$1`, `?`). */
  placeholder(n: number): string;
  /** Runs a write in `tx`; answers the rows it matched (on MySQL matched, not only changed, whatever `CLIENT_FOUND_ROWS`). */
  execute(tx: Tx, sql: string, values: readonly SqlValue[]): Promise<number>;
  /** Runs a read in `tx`; answers its rows by column name. */
  query(tx: Tx, sql: string, values: readonly SqlValue[]): Promise<readonly Record<string, unknown>[]>;
}
