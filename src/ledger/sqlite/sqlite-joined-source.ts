import { isThenable } from '../../core/thenable.js';
import type { SqliteConnectionSource } from './sqlite-connection-source.js';
import type { SqliteDatabaseLike } from './sqlite-database.js';

/**
 * The source of a ledger joined to `tx`, a transaction the application opened with the tool of
 * `source`: every operation runs on that transaction's connection at once (the application holds it),
 * and a claim's transaction is `tx` itself, so the ledger claims under a savepoint of it. The
 * connection is looked up again for each operation, so a transaction that has ended is refused.
 * Throws `source`'s ConfigError at once for what is not such a transaction.
 */
export function joinedSqliteSource<Db extends SqliteDatabaseLike, Tx>(
  source: SqliteConnectionSource<Db, Tx>,
  tx: Tx,
): SqliteConnectionSource<Db, Tx> {
  const first = source.database(tx);
  // a refusal that only the lookup's promise reports is reported again by the first operation
  if (isThenable(first)) Promise.resolve(first).catch(() => undefined);
  const connection = async (): Promise<Db> => (await source.database(tx)) as Db;
  return {
    memory: source.memory,
    hold: async (work) => work(await connection()),
    transaction: async (work) => work(await connection(), tx),
    database: (other) => source.database(other),
  };
}
