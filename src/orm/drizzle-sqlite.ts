import { ConfigError } from '../core/errors.js';
import {
  isSqliteDatabase,
  type SqliteDatabaseLike,
  type SqliteHandle,
} from '../ledger/sqlite/sqlite-database.js';
import type { SQLWrapper } from 'drizzle-orm';
import { drizzleKinds } from './drizzle-bridge.js';

/**
 * What tells a Drizzle database on SQLite (`BetterSQLite3Database`) from one on a server: its
 * synchronous `run` and `all`. oncemq calls none of it; it opens the claims' transactions on the
 * better-sqlite3 `Database` under it, `db.$client`.
 */
export interface DrizzleSqliteLike {
  /** Runs a statement at once (better-sqlite3 is synchronous). */
  run(query: SQLWrapper): unknown;
  /** Reads every row of a statement at once. */
  all(query: SQLWrapper): unknown;
}

/** The better-sqlite3 `Database` under a Drizzle database: `db.$client` (absent on `drizzle.mock()`). */
export function drizzleSqliteClient(db: DrizzleSqliteLike): SqliteDatabaseLike {
  const client = (db as { $client?: unknown }).$client;
  if (!isSqliteDatabase(client)) {
    throw new ConfigError(
      'db',
      'this Drizzle database has no better-sqlite3 Database as its $client: build it with drizzle(new Database(file))',
    );
  }
  return client;
}

/**
 * The handle of a SQLite ledger whose handler receives the Drizzle database `db` as `ctx.tx`: the
 * ledger's `BEGIN IMMEDIATE` runs on `db.$client`, so every write through `db` while the claim's
 * transaction is open belongs to it. `ledger.dialect` (`transition()`, `outbox.add()`) takes `db`
 * back only while that transaction is open: outside one, a write would commit on its own. A
 * better-sqlite3 `Database` itself passes as it is: the relay and `outbox.migrate()` run on one of
 * their own.
 */
export function drizzleSqliteHandle<Db extends DrizzleSqliteLike>(
  db: Db,
): SqliteHandle<SqliteDatabaseLike, Db> {
  const client = drizzleSqliteClient(db);
  return {
    of: () => db,
    database(tx: Db): SqliteDatabaseLike {
      const kinds = drizzleKinds(tx);
      if (kinds.length === 0 && isSqliteDatabase(tx)) return tx;
      if (!kinds.includes('BetterSQLite3Database')) {
        throw new ConfigError(
          'tx',
          kinds.includes('SQLiteTransaction')
            ? 'expected the Drizzle database (ctx.tx), not a transaction of db.transaction(): that one is ' +
                'synchronous and ends before a statement that awaits runs; write through ctx.tx, which is already ' +
                'inside the claim’s transaction'
            : 'expected the Drizzle database of drizzle-orm/better-sqlite3 the ledger was built on (ctx.tx)',
        );
      }
      if ((tx as { $client?: unknown }).$client !== client) {
        throw new ConfigError(
          'tx',
          'expected the Drizzle database the ledger was built on: another database’s writes are outside the claim’s transaction',
        );
      }
      if (!client.inTransaction) {
        throw new ConfigError(
          'tx',
          'no transaction is open on the database, so this write would commit on its own: use ctx.tx in a handler, ' +
            'or the work of ledger.transaction(), where the claim’s transaction is open',
        );
      }
      return client;
    },
  };
}
