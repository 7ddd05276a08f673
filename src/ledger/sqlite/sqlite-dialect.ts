import type { SqlDialect, SqlValue } from '../sql-dialect.js';
import { quoteIdentifier } from '../sql-identifier.js';
import type { SqliteDatabaseLike } from './sqlite-database.js';

/** Runs better-sqlite3's synchronous call as a promise, so a driver error rejects instead of throwing. */
function later<T>(run: () => T): Promise<T> {
  try {
    return Promise.resolve(run());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

/** SQLite through better-sqlite3: `ctx.tx` is the database, `?` placeholders, a single writer (no locking read). */
export const sqliteDialect: SqlDialect<SqliteDatabaseLike> = Object.freeze({
  name: 'sqlite',
  lockingRead: '',
  quote: quoteIdentifier,
  placeholder: () => '?',
  execute: (db: SqliteDatabaseLike, sql: string, values: readonly SqlValue[]) =>
    later(() => Number(db.prepare(sql).run(...values).changes)),
  query: (db: SqliteDatabaseLike, sql: string, values: readonly SqlValue[]) =>
    later(() => db.prepare(sql).all(...values) as Record<string, unknown>[]),
});
