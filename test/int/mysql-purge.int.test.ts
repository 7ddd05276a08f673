import type mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { MysqlLedger } from 'oncemq/mysql';
import { ledgerTables, mysqlRequest, mysqlService, testPool, uniqueTable } from '../support/mysql.js';

const service = await mysqlService();

const request = mysqlRequest;

/**
 * `pool` with its `execute` watched: every statement is recorded, and `beforeDelete` (when set) runs
 * once before the next DELETE goes to the server — after the purge read its keys, before it deletes.
 */
function watchedPool(pool: mysql.Pool) {
  const statements: string[] = [];
  const watch = { statements, beforeDelete: undefined as (() => Promise<void>) | undefined };
  const execute = async (sql: string, values?: unknown[]): Promise<unknown> => {
    statements.push(sql);
    const hook = watch.beforeDelete;
    if (hook !== undefined && /^\s*DELETE\b/i.test(sql)) {
      watch.beforeDelete = undefined;
      await hook();
    }
    return pool.execute(sql, values as never);
  };
  const proxied = new Proxy(pool, {
    get(target, property) {
      if (property === 'execute') return execute;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { pool: proxied, watch };
}

describe.skipIf(!service.available)('MysqlLedger on MariaDB: purge by primary key', () => {
  const pool = testPool(service.url, { size: 8 });
  const ledgers = ledgerTables(pool);

  afterAll(async () => {
    await ledgers.drop();
    await pool.end();
  });

  it('keeps a row claimed again, or re-created and completed, between the read of its key and its DELETE', async () => {
    let now = 20_000_000;
    const clock = () => now;
    const table = uniqueTable('purge');
    const rival = await ledgers.open(pool, { clock, table });
    const watched = watchedPool(pool);
    const purger = new MysqlLedger<mysql.PoolConnection>({ pool: watched.pool, clock, table });
    await purger.init();
    await rival.transaction(request('done-again'), () => null);
    await rival.recordFailure(request('failed-reclaimed'), 'db down');
    await rival.transaction(request('expired'), () => null);
    now += 60_000;
    watched.watch.beforeDelete = async () => {
      // another connection, committed before the purge's DELETE runs
      expect((await rival.claim(request('failed-reclaimed'))).status).toBe('reclaimed');
      expect(await rival.reset('points', 'done-again', { force: true })).toBe(true);
      await rival.transaction(request('done-again'), () => null);
    };

    const purged = await purger.purge({ olderThan: new Date(now - 1000), batchSize: 10 });

    expect(watched.watch.beforeDelete).toBeUndefined();
    expect(purged).toEqual({ deleted: 1, batches: 1 });
    expect(await rival.get('points', 'expired')).toBeUndefined();
    expect(await rival.get('points', 'failed-reclaimed')).toMatchObject({ status: 'PROCESSING', attempt: 2 });
    expect(await rival.get('points', 'done-again')).toMatchObject({
      status: 'SUCCESS',
      updatedAt: new Date(now),
    });
    await purger.close();
  });

  it('reads a batch of keys once and deletes them in primary-key chunks of 1,000, each its own statement', async () => {
    const now = 30_000_000;
    const table = uniqueTable('purge');
    const ledger = await ledgers.open(pool, { clock: () => now, table });
    // 2,500 expired SUCCESS rows, 1 recent one, 1 PROCESSING one past the cut-off (MariaDB's SEQUENCE engine)
    await pool.query(
      `INSERT INTO \`${table}\` (consumer_group, msg_key, status, fingerprint, attempt, created_at, updated_at)
       SELECT IF(seq % 2 = 0, 'points', 'mail'), MD5(seq), 'SUCCESS', 'fp', 1, ?, ? FROM seq_1_to_2500`,
      [now - 60_000, now - 60_000],
    );
    await ledger.transaction(request('recent'), () => null);
    await pool.query(`UPDATE \`${table}\` SET status = 'PROCESSING', owner = 'x' WHERE msg_key = MD5(7)`);
    const watched = watchedPool(pool);
    const purger = new MysqlLedger<mysql.PoolConnection>({ pool: watched.pool, clock: () => now, table });
    await purger.init();
    watched.watch.statements.length = 0;

    const purged = await purger.purge({ olderThan: new Date(now - 1000), batchSize: 3000 });

    expect(purged).toEqual({ deleted: 2499, batches: 1 });
    const kinds = watched.watch.statements.map((sql) => /^\s*(\w+)/.exec(sql)?.[1]);
    expect(kinds).toEqual(['SELECT', 'DELETE', 'DELETE', 'DELETE']);
    const [left] = await pool.query(`SELECT msg_key, status FROM \`${table}\` ORDER BY msg_key`);
    expect((left as { status: string }[]).map((row) => row.status).sort()).toEqual(['PROCESSING', 'SUCCESS']);
    expect(await ledger.get('points', 'recent')).toMatchObject({ status: 'SUCCESS' });
    await purger.close();
  });
});
