import { isThenable } from '../../core/thenable.js';
import type { SqlDialect, SqlValue } from '../sql-dialect.js';
import { quoteIdentifier } from '../sql-identifier.js';
import type { SqliteDatabaseLike } from './sqlite-database.js';

/** Runs better-sqlite3's synchronous call as a promise, so a driver error rejects instead of throwing. */
function later<T>(run: () => T | PromiseLike<T>): Promise<T> {
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

/**
 * The SQLite dialect on a handle of the database (a query builder or ORM built on it): `database(tx)`
 * finds the better-sqlite3 database the statements run on — at once, as the plain dialect does, or,
 * when the tool lends its connection only through a promise (MikroORM), once it resolves — and what it
 * refuses rejects.
 */
export function sqliteDialectOver<Tx>(
  database: (tx: Tx) => SqliteDatabaseLike | PromiseLike<SqliteDatabaseLike>,
): SqlDialect<Tx> {
  const on = <T>(tx: Tx, run: (db: SqliteDatabaseLike) => T): Promise<T> =>
    later(() => {
      const db = database(tx);
      return isThenable(db) ? Promise.resolve(db).then(run) : run(db);
    });
  return Object.freeze({
    name: sqliteDialect.name,
    lockingRead: sqliteDialect.lockingRead,
    quote: quoteIdentifier,
    placeholder: () => '?',
    execute: (tx: Tx, sql: string, values: readonly SqlValue[]) =>
      on(tx, (db) => Number(db.prepare(sql).run(...values).changes)),
    query: (tx: Tx, sql: string, values: readonly SqlValue[]) =>
      on(tx, (db) => db.prepare(sql).all(...values) as Record<string, unknown>[]),
  });
}
