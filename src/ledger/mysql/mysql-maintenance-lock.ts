import type { MaintenanceLock } from '../ledger.js';
import { rows, wrapMysqlError, type MysqlConnectionLike, type MysqlPoolLike } from './mysql-client.js';

/**
 * Takes the server-wide user lock `name` without waiting (GET_LOCK with timeout 0) on `conn`; the
 * lock lives as long as the connection or until release. `run` serializes statements on a shared
 * connection; `done` hands the connection back once the lock is released (or was not taken).
 */
export async function takeMysqlUserLock(
  name: string,
  conn: MysqlConnectionLike,
  done: () => void,
  run: <T>(fn: () => Promise<T>) => Promise<T> = (fn) => fn(),
): Promise<MaintenanceLock | undefined> {
  let held: boolean;
  try {
    held = await run(async () => {
      const [result] = await conn.execute('SELECT GET_LOCK(?, 0) AS locked', [name]);
      return Number(rows<{ locked: unknown }>(result)[0]?.locked) === 1;
    });
  } catch (error) {
    done();
    throw wrapMysqlError(error, 'taking the maintenance lock');
  }
  if (!held) {
    done();
    return undefined;
  }
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      try {
        await run(() => conn.execute('SELECT RELEASE_LOCK(?)', [name]));
      } catch (error) {
        throw wrapMysqlError(error, 'releasing the maintenance lock');
      } finally {
        done();
      }
    },
  };
}

/** {@link takeMysqlUserLock} on a pool connection kept out of the pool while the lock is held. */
export async function takeMysqlUserLockFromPool(
  name: string,
  pool: MysqlPoolLike,
): Promise<MaintenanceLock | undefined> {
  let conn: MysqlConnectionLike & { release(): void };
  try {
    conn = await pool.getConnection();
  } catch (error) {
    throw wrapMysqlError(error, 'taking a pool connection for the maintenance lock');
  }
  return takeMysqlUserLock(name, conn, () => {
    conn.release();
  });
}
