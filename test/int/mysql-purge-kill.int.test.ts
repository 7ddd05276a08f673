import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MysqlLedger } from 'oncemq/mysql';
import { buildPackage } from '../support/built-package.js';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';
import {
  expectExpiredGone,
  expectLiveReplays,
  expectLockTakenOver,
  expectWholeOrGone,
  purgerScript,
  startPurger,
  type KilledRow,
} from '../support/purger-process.js';

const service = await mysqlService();

/**
 * A retention pass in a process of its own, on the ledger `table`: prints `locked` once the pass runs
 * (it holds the maintenance lock), then a line per batch of 500 keys (deleted 1,000 rows a statement
 * at most, so each batch is one DELETE here), until it is killed.
 */
const PURGER = purgerScript(
  `import mysql from 'mysql2/promise';
import { MysqlLedger } from './mysql.js';
const [url, table] = process.argv.slice(2);
const pool = mysql.createPool({ uri: url, connectionLimit: 3 });
const ledger = new MysqlLedger({ pool, table, migrate: false });`,
  500,
);

interface Row extends KilledRow {
  readonly msg_key: string;
  readonly attempt: number;
  readonly result: string | null;
}

/**
 * A retention pass killed with SIGKILL midway: every row it left is exactly as it was, no row inside
 * the retention is gone, so a replay of any of them is answered `duplicate` with its stored result;
 * the dead purger's GET_LOCK is freed when MariaDB ends its connection, and the next pass finishes.
 */
describe.skipIf(!service.available)('a MariaDB retention pass killed with kill -9 midway', () => {
  let build: ReturnType<typeof buildPackage>;
  let pool: mysql.Pool;
  const table = uniqueTable('kill');

  beforeAll(() => {
    build = buildPackage();
    writeFileSync(join(build.dir, 'purger.mjs'), PURGER);
    pool = testPool(service.url, { size: 4 });
  }, 120_000);

  afterAll(async () => {
    await dropLedgerTables(pool, table);
    await pool.end();
    build.remove();
  });

  const snapshot = async (): Promise<Map<string, Row>> => {
    const [found] = await pool.query(
      `SELECT CAST(msg_key AS CHAR) AS msg_key, status, attempt, result, updated_at FROM \`${table}\``,
    );
    type Raw = Omit<Row, 'updated'> & { readonly updated_at: number | string };
    return new Map(
      (found as Raw[]).map(({ updated_at, ...row }) => [
        row.msg_key,
        { ...row, updated: Number(updated_at) },
      ]),
    );
  };

  it('leaves every row whole or gone, none live gone, and its lock to the next purger', async () => {
    const ledger = new MysqlLedger<mysql.PoolConnection>({ pool, table });
    await ledger.init();
    const now = Date.now();
    const cutoff = now - 8 * 86_400_000;
    // 20,000 expired rows 9 to 12 days old, stuck claims among them, and 2,000 rows inside the retention.
    await pool.query(
      `INSERT INTO \`${table}\` (consumer_group, msg_key, status, owner, attempt, lease_until, result, created_at, updated_at)
       SELECT 'points', CONCAT('old-', seq), CASE WHEN seq % 100 = 0 THEN 'PROCESSING' WHEN seq % 10 = 0 THEN 'FAIL' ELSE 'SUCCESS' END,
         IF(seq % 100 = 0, 'dead-owner', NULL), 1, IF(seq % 100 = 0, ts, NULL), CONCAT('{"old":', seq, '}'), ts, ts
       FROM (SELECT seq, ? - 86400000 * (9 + seq % 4) - seq % 3600 AS ts FROM seq_1_to_20000) AS s`,
      [now],
    );
    await pool.query(
      `INSERT INTO \`${table}\` (consumer_group, msg_key, status, attempt, result, created_at, updated_at)
       SELECT 'points', CONCAT('new-', seq), 'SUCCESS', 1, CONCAT('{"new":', seq, '}'), ? - 3600000, ? - 3600000
       FROM seq_1_to_2000`,
      [now, now],
    );
    const before = await snapshot();
    const file = join(build.dir, 'purger.mjs');
    const child = await startPurger(
      file,
      [service.url, table, String(Date.now() - cutoff)],
      (out) => (out.match(/batch/g)?.length ?? 0) >= 3,
    );
    // While the purger runs, its lock keeps a second instance out.
    expect(await ledger.tryMaintenanceLock()).toBeUndefined();
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    expectWholeOrGone(before, await snapshot(), cutoff);
    await expectLiveReplays(ledger, 2000);

    // The dead connection's GET_LOCK is gone once MariaDB has ended it; the next pass finishes the work.
    await expectLockTakenOver(ledger);
    await ledger.purge({ olderThan: new Date(cutoff), batchSize: 5000 });
    expectExpiredGone(before, await snapshot(), cutoff);
    await ledger.close();
  }, 60_000);
});
