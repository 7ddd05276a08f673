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
 * How a claim's transaction opened by a query builder takes SQLite's write lock without blocking the
 * process. The builder's `BEGIN` is deferred: the lock is taken by the first write, and better-sqlite3
 * waits for it synchronously (up to the connection's busy timeout), with the event loop stopped. When
 * the holder is another connection of the same process whose transaction awaits (a handler on a second
 * Knex pool connection, a relay's own connection), it can never let go, and the wait ends in
 * `SQLITE_BUSY`. So the transaction's first statement is a write that matches nothing
 * (`DELETE … WHERE 0`), run with the busy timeout at 0; when the lock is held, the transaction rolls
 * back and is tried again after a pause of the event loop, for as long as the busy timeout would have
 * waited. Once taken, the lock is the transaction's until it ends: nothing after waits for it.
 */
export class SqliteWriteLock {
  readonly #probe: string;

  constructor(table: string) {
    this.#probe = `DELETE FROM ${quoteIdentifier(table)} WHERE 0`;
  }

  /** Takes the write lock in the transaction open on `db`, at once, or throws for a retry. */
  take(db: SqliteDatabaseLike): void {
    const row = db.prepare('PRAGMA busy_timeout').get() as { timeout?: unknown } | undefined;
    const patienceMs = typeof row?.timeout === 'number' ? row.timeout : 0;
    db.exec('PRAGMA busy_timeout = 0');
    try {
      db.prepare(this.#probe).run();
    } catch (error) {
      if (isBusy(error)) throw new WriteLockHeld(patienceMs, error);
      throw error;
    } finally {
      db.exec(`PRAGMA busy_timeout = ${patienceMs}`);
    }
  }

  /** Runs `transaction` (which calls take() first) again while the lock is held, within the busy timeout. */
  async retry<T>(transaction: () => Promise<T>): Promise<T> {
    const started = Date.now();
    for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
      try {
        return await transaction();
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
