import { quoteIdentifier } from '../ledger/sql-identifier.js';
import type { SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';

/** First pause before a claim's transaction is tried again for a write lock held elsewhere. */
const FIRST_PAUSE_MS = 2;
/** Longest pause between two tries. */
const LONGEST_PAUSE_MS = 100;

/** SQLite's answer when another connection holds the lock (`SQLITE_BUSY`, `SQLITE_BUSY_SNAPSHOT`…). */
function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/** The write lock was held by another connection: the transaction is rolled back and tried again. */
class WriteLockHeld extends Error {
  constructor(
    /** How long the connection's busy timeout lets a write wait for the lock. */
    readonly patienceMs: number,
    /** SQLite's refusal, thrown as it is once the patience has run out. */
    readonly refusal: unknown,
  ) {
    super('the SQLite write lock is held by another connection');
  }
}

/**
 * How the ledger on a query builder's SQLite connection waits for the write lock without blocking the
 * process. better-sqlite3 waits for a lock held by another connection synchronously (up to the
 * connection's busy timeout), with the event loop stopped; when the holder is another connection of
 * the same process whose transaction awaits (a handler on a second connection of Knex's pool, another
 * Kysely instance on the file), it can never let go, and the wait ends in `SQLITE_BUSY`. So the ledger
 * never waits in SQLite: its statements run with the busy timeout at 0, and what found the lock held is
 * rolled back and tried again after a pause of the event loop, for as long as the busy timeout would
 * have waited.
 *
 * - A claim's transaction (the builder's `BEGIN` is deferred) takes the lock with its first statement,
 *   a write that matches nothing (`DELETE … WHERE 0`): once taken, the lock is the transaction's until
 *   it ends, and nothing after waits for it (take()).
 * - Every other operation is one synchronous piece of work that either completes or changes nothing
 *   when a statement finds the lock held (a single statement, or migrations in their own transaction),
 *   so it is run again whole (patiently()).
 */
export class SqliteWriteLock {
  readonly #probe: string;

  constructor(table: string) {
    this.#probe = `DELETE FROM ${quoteIdentifier(table)} WHERE 0`;
  }

  /** Takes the write lock in the transaction open on `db`, at once, or throws for a retry. */
  take(db: SqliteDatabaseLike): void {
    this.patiently(db, () => db.prepare(this.#probe).run());
  }

  /** Runs `work` on `db` with the busy timeout at 0: a statement that finds a lock held throws for a retry. */
  patiently<T>(db: SqliteDatabaseLike, work: () => T): T {
    const row = db.prepare('PRAGMA busy_timeout').get() as { timeout?: unknown } | undefined;
    const patienceMs = typeof row?.timeout === 'number' ? row.timeout : 0;
    db.exec('PRAGMA busy_timeout = 0');
    try {
      return work();
    } catch (error) {
      if (isBusy(error)) throw new WriteLockHeld(patienceMs, error);
      throw error;
    } finally {
      db.exec(`PRAGMA busy_timeout = ${patienceMs}`);
    }
  }

  /** Runs `attempt` (which calls take() or patiently()) again while the lock is held, within the busy timeout. */
  async retry<T>(attempt: () => Promise<T>): Promise<T> {
    const started = Date.now();
    for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
      try {
        return await attempt();
      } catch (error) {
        if (!(error instanceof WriteLockHeld)) throw error;
        const left = started + error.patienceMs - Date.now();
        if (left <= 0) throw error.refusal;
        const wait = Math.min(left, pause * (0.5 + Math.random()));
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }
}
