import type { ConnectionQueue } from './connection-queue.js';
import type { SqliteDatabaseLike } from './sqlite-database.js';

/**
 * How the SQLite ledger reaches a better-sqlite3 connection that an ORM owns (TypeORM's, MikroORM's):
 * through the ORM, so that the ORM's own transaction bookkeeping knows of every transaction on it and
 * nothing of the ORM runs on the connection in the middle of the ledger's statements.
 */
export interface SqliteConnectionSource<Db extends SqliteDatabaseLike, Tx> {
  /** True for an in-memory database: no other connection can reach it. */
  readonly memory: boolean;
  /**
   * Operations of every ledger on this connection take turns here (one queue per ORM instance), so
   * that one ledger's claim never meets another's transaction on the shared connection. @default one per ledger
   */
  readonly queue?: ConnectionQueue;
  /** Runs `work` on the connection, lent to it alone and outside any transaction. */
  hold<T>(work: (db: Db) => T | Promise<T>): Promise<T>;
  /**
   * Runs `work` in a transaction the ORM opens on the connection (the ledger's statements then run under
   * a savepoint of it): `db` is the connection, `tx` the ORM's transaction object for the handler.
   * Commits when work resolves; rolls back and rethrows work's error when it throws.
   */
  transaction<T>(work: (db: Db, tx: Tx) => Promise<T>): Promise<T>;
  /**
   * The connection under `tx` for `ledger.dialect` (`transition()`, `outbox.add()`), while its
   * transaction is open; a ConfigError for anything else.
   */
  database(tx: Tx): SqliteDatabaseLike | Promise<SqliteDatabaseLike>;
}
