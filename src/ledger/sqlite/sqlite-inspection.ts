import { randomUUID } from 'node:crypto';
import type { ListQuery, MaintenanceLock } from '../ledger.js';
import { listFilter } from '../list-filter.js';
import { quoteIdentifier } from '../sql-identifier.js';

/** How long a SQLite maintenance lock lasts unless renewed; a holder that dies frees it after this. */
export const SQLITE_MAINTENANCE_LEASE_MS = 60_000;

/** The statement and values of a `list` query on a SQLite ledger table (oldest update first). */
export function sqliteListQuery(table: string, query: ListQuery): { sql: string; values: unknown[] } {
  const { where, values, limit } = listFilter(query, (deadline) => deadline.getTime());
  return {
    sql: `SELECT * FROM ${quoteIdentifier(table)}${where} ORDER BY updated_at, rowid LIMIT ?`,
    values: [...values, limit],
  };
}

/** The part of a database the lock needs, run one operation at a time by the ledger. */
export interface SqliteLockStatements {
  run(sql: string, ...params: unknown[]): number;
}

/**
 * Maintenance lock of a SQLite ledger shared by several processes: a lease row in `<table>_lock`.
 * Taking it inserts the row, or takes over a row whose lease ended; the holder renews the lease
 * on a timer and deletes the row on release. A crashed holder's lock frees itself after the lease.
 */
export async function takeSqliteMaintenanceLock(
  table: string,
  clock: () => number,
  exclusive: <T>(fn: (db: SqliteLockStatements) => T) => Promise<T>,
  leaseMs = SQLITE_MAINTENANCE_LEASE_MS,
): Promise<MaintenanceLock | undefined> {
  const locks = quoteIdentifier(`${table}_lock`);
  const owner = randomUUID();
  const taken = await exclusive((db) => {
    db.run(
      `CREATE TABLE IF NOT EXISTS ${locks} (name TEXT PRIMARY KEY, owner TEXT NOT NULL, lease_until INTEGER NOT NULL)`,
    );
    const now = clock();
    return db.run(
      `INSERT INTO ${locks} (name, owner, lease_until) VALUES ('maintenance', ?, ?)
       ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
       WHERE lease_until <= ?`,
      owner,
      now + leaseMs,
      now,
    );
  });
  if (taken !== 1) return undefined;
  const renew = setInterval(
    () => {
      exclusive((db) =>
        db.run(
          `UPDATE ${locks} SET lease_until = ? WHERE name = 'maintenance' AND owner = ?`,
          clock() + leaseMs,
          owner,
        ),
      ).catch(() => undefined);
    },
    Math.max(1, Math.floor(leaseMs / 3)),
  );
  renew.unref();
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      clearInterval(renew);
      await exclusive((db) => db.run(`DELETE FROM ${locks} WHERE name = 'maintenance' AND owner = ?`, owner));
    },
  };
}
