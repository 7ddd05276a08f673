import { setTimeout as sleep } from 'node:timers/promises';
import type { SqliteDatabaseLike } from './sqlite-database.js';

/**
 * A claim met another connection's write lock and did not wait for it in place: better-sqlite3 waits
 * for a lock synchronously, holding the whole thread, so a holder in the same process (an ORM's
 * transaction whose handler awaits) could never finish. {@link waitForWriteLock} waits instead.
 */
export class WriteLockBusy extends Error {
  constructor(
    /** How long the connection's `busy_timeout` would have waited, in milliseconds. */
    readonly waitMs: number,
    /** SQLite's SQLITE_BUSY error. */
    override readonly cause: unknown,
  ) {
    super('the SQLite write lock is held by another connection');
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * Runs `fn` on `db` with SQLite's busy wait off (its `busy_timeout` put back after): another
 * connection's write lock throws {@link WriteLockBusy} at once instead of blocking the thread.
 */
export function withoutBusyWait<T>(db: SqliteDatabaseLike, fn: () => T): T {
  const row = db.prepare('PRAGMA busy_timeout').get() as { timeout?: unknown } | undefined;
  const waitMs = Number(row?.timeout ?? 0);
  db.exec('PRAGMA busy_timeout = 0');
  try {
    return fn();
  } catch (error) {
    throw isBusy(error) ? new WriteLockBusy(waitMs, error) : error;
  } finally {
    db.exec(`PRAGMA busy_timeout = ${waitMs}`);
  }
}

/** Longest pause between two tries for the write lock, in milliseconds. */
const MAX_PAUSE_MS = 50;

/**
 * Runs `attempt` again, after a growing pause that lets the event loop run, while it throws
 * {@link WriteLockBusy}, for as long as the connection's `busy_timeout` would have waited; then throws
 * SQLite's SQLITE_BUSY error.
 */
export async function waitForWriteLock<T>(attempt: () => Promise<T>): Promise<T> {
  const started = Date.now();
  for (let pause = 1; ; pause = Math.min(pause * 2, MAX_PAUSE_MS)) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof WriteLockBusy)) throw error;
      if (Date.now() - started >= error.waitMs) throw error.cause;
    }
    await sleep(pause);
  }
}
