import { ConfigError } from '../../core/errors.js';
import type { SqliteDatabaseLike } from '../../sql/sqlite-like.js';
import { unavailable, type OutboxSession } from '../outbox-session.js';
import { outboxColumns, outboxIndexes, ROW_COLUMNS, type OutboxSql } from './outbox-sql.js';

/**
 * The relay's work runs statement by statement in autocommit on a connection of its own, each
 * statement atomic (the claim is one `UPDATE … RETURNING`). Holding `BEGIN` across an `await` would
 * keep the write lock while the event loop turns, and another connection of the same process waiting
 * for it synchronously would never let it go. With `begin` (the caller's work spans statements that
 * must commit together) the work runs in `BEGIN IMMEDIATE`, one at a time.
 */
function sqliteSession(db: SqliteDatabaseLike, begin: boolean): OutboxSession<unknown> {
  let queue: Promise<unknown> = Promise.resolve();
  const inTransaction = (): boolean => db.inTransaction;
  return {
    transaction(work) {
      const run = async (): Promise<Awaited<ReturnType<typeof work>>> => {
        if (inTransaction()) {
          throw new ConfigError(
            'database',
            'the SQLite connection is inside a transaction: give the outbox a connection of its own (new Database(file))',
          );
        }
        if (begin) db.exec('BEGIN IMMEDIATE');
        try {
          const value = await work(db);
          if (begin) db.exec('COMMIT');
          return value;
        } catch (error) {
          if (inTransaction()) db.exec('ROLLBACK');
          throw begin ? error : unavailable(error, 'running a statement');
        }
      };
      const next = queue.then(run, run);
      queue = next.catch(() => undefined);
      return next;
    },
  };
}

/**
 * The outbox on SQLite: one writer per file, so no `SKIP LOCKED`; the claim is one atomic
 * `UPDATE … RETURNING` in autocommit, after a plain read that keeps an idle relay off the write lock.
 */
export const sqliteOutbox: OutboxSql = {
  schemas: false,
  notifies: false,
  skipLocked: '',
  readBeforeClaim: true,
  ddl: (tables) => [
    `CREATE TABLE IF NOT EXISTS ${tables.messages} (${outboxColumns({ id: 'INTEGER PRIMARY KEY AUTOINCREMENT', text: 'TEXT', name: 'TEXT', big: 'INTEGER', blob: 'BLOB', int: 'INTEGER' })})`,
    ...outboxIndexes(tables),
    `CREATE TABLE IF NOT EXISTS ${tables.keys} (ordering_key TEXT PRIMARY KEY, last_seq INTEGER NOT NULL)`,
  ],
  nextSeq: (keys) =>
    `INSERT INTO ${keys} (ordering_key, last_seq) VALUES (?, 1) ` +
    'ON CONFLICT (ordering_key) DO UPDATE SET last_seq = last_seq + 1 RETURNING last_seq',
  readSeq: () => undefined,
  claim: {
    sql: ({ messages }, picked) =>
      `UPDATE ${messages} SET lease_owner = ?, lease_until = ?, attempts = attempts + 1 ` +
      `WHERE id IN (${picked}) RETURNING ${ROW_COLUMNS}`,
    values: (owner, leaseUntil, now, ids) => [owner, leaseUntil, now, now, ...ids],
  },
  cleanup: (messages, batch) =>
    `DELETE FROM ${messages} WHERE id IN (SELECT id FROM ${messages} WHERE sent_at < ? ORDER BY id LIMIT ${batch})`,
  needs: 'a better-sqlite3 Database of its own',
  accepts: (database) => {
    const shape = database as Partial<SqliteDatabaseLike> | null;
    return typeof shape?.prepare === 'function' && typeof shape.exec === 'function';
  },
  session: (database, atomic) => sqliteSession(database as SqliteDatabaseLike, atomic),
};
