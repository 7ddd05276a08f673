import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseLostError, LedgerUnavailableError } from 'oncemq';
import { fitMetadata } from '../support/internal.js';
import { sleep } from '../support/points.js';
import { ledgerTables, mysqlRequest, mysqlService, testPool, uniqueTable } from '../support/mysql.js';

const service = await mysqlService();

const request = mysqlRequest;

describe.skipIf(!service.available)('MysqlLedger on MariaDB', () => {
  const pool = testPool(service.url, { size: 24 });
  const ledgers = ledgerTables(pool);
  const ledgerOn = ledgers.open;

  afterAll(async () => {
    await ledgers.drop();
    await pool.query('DROP TABLE IF EXISTS t_points_ledger_test');
    await pool.end();
  });

  it('acquires a first claim and answers a committed key as duplicate with the first copy attributed', async () => {
    const ledger = await ledgerOn();
    const first = await ledger.transaction(request('evt-1'), () => '"ok"');
    expect(first).toMatchObject({ status: 'acquired', claim: { attempt: 1 } });
    const second = await ledger.transaction(request('evt-1', { brokerId: 'b2' }), () => {
      throw new Error('must not run');
    });
    expect(second).toMatchObject({
      status: 'duplicate',
      record: { status: 'SUCCESS', brokerId: 'b1', result: '"ok"', key: 'evt-1', group: 'points' },
    });
  });

  it('compares keys byte for byte: case and trailing spaces make different keys', async () => {
    const ledger = await ledgerOn();
    for (const key of ['Key', 'key', 'key ', 'key  ', 'ключ', 'ключ ']) {
      expect((await ledger.claim(request(key))).status).toBe('acquired');
    }
    expect((await ledger.claim(request('key '))).status).toBe('busy');
    expect((await ledger.get('points', 'key  '))?.key).toBe('key  ');
    expect(await ledger.get('Points', 'key')).toBeUndefined();
  });

  it('rolls back the claim with the handler writes when the handler throws, freeing the key', async () => {
    const ledger = await ledgerOn();
    await pool.query('CREATE TABLE IF NOT EXISTS t_points_ledger_test (id VARCHAR(64) PRIMARY KEY)');
    await expect(
      ledger.transaction(request('evt-rollback'), async (conn) => {
        await conn.execute('INSERT INTO t_points_ledger_test (id) VALUES (?)', ['evt-rollback']);
        throw new Error('handler failed after its write');
      }),
    ).rejects.toThrow('handler failed after its write');
    expect(await ledger.get('points', 'evt-rollback')).toBeUndefined();
    const [written] = await pool.query<RowDataPacket[]>('SELECT id FROM t_points_ledger_test WHERE id = ?', [
      'evt-rollback',
    ]);
    expect(written).toHaveLength(0);
    expect((await ledger.transaction(request('evt-rollback'), () => null)).status).toBe('acquired');
  });

  it('lets 20 concurrent transactional claims of one key on separate connections apply the work once; the rest wait and see duplicate', async () => {
    const ledger = await ledgerOn();
    let executions = 0;
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        ledger.transaction(request('evt-race', { brokerId: `copy-${i}` }), async () => {
          executions++;
          await sleep(50);
          return null;
        }),
      ),
    );
    expect(executions).toBe(1);
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 'acquired')).toHaveLength(1);
    expect(statuses.filter((s) => s === 'duplicate')).toHaveLength(19);
  });

  it('gives the key to a waiting duplicate when the in-flight claim rolls back, never surfacing an error', async () => {
    const ledger = await ledgerOn();
    let executions = 0;
    let failFirst = true;
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, () =>
        ledger.transaction(request('evt-rolled'), async () => {
          executions++;
          await sleep(30);
          if (failFirst) {
            failFirst = false;
            throw new Error('first attempt fails');
          }
          return null;
        }),
      ),
    );
    const rejected = results.filter((r) => r.status === 'rejected');
    expect(rejected).toHaveLength(1);
    expect(String((rejected[0] as PromiseRejectedResult).reason)).toContain('first attempt fails');
    const statuses = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.status] : []));
    expect(statuses.filter((s) => s === 'acquired')).toHaveLength(1);
    expect(statuses.filter((s) => s === 'duplicate')).toHaveLength(6);
    expect(executions).toBe(2);
    expect(await ledger.get('points', 'evt-rolled')).toMatchObject({ status: 'SUCCESS', attempt: 1 });
  });

  it('answers a different payload fingerprint under a known key as conflict', async () => {
    const ledger = await ledgerOn();
    await ledger.transaction(request('evt-fp'), () => null);
    expect((await ledger.transaction(request('evt-fp', { fingerprint: 'fp-2' }), () => null)).status).toBe(
      'conflict',
    );
  });

  it('records a failed transactional attempt as FAIL, counts attempts, and a redelivery reclaims it', async () => {
    const ledger = await ledgerOn();
    await ledger.recordFailure(request('evt-fail'), 'boom 1');
    expect(await ledger.get('points', 'evt-fail')).toMatchObject({
      status: 'FAIL',
      attempt: 1,
      remark: 'boom 1',
    });
    await expect(
      ledger.transaction(request('evt-fail'), () => {
        throw new Error('boom 2');
      }),
    ).rejects.toThrow('boom 2');
    await ledger.recordFailure(request('evt-fail'), 'boom 2');
    expect(await ledger.get('points', 'evt-fail')).toMatchObject({
      status: 'FAIL',
      attempt: 2,
      remark: 'boom 2',
    });
    const third = await ledger.transaction(request('evt-fail'), () => '"done"');
    expect(third).toMatchObject({ status: 'reclaimed', claim: { attempt: 3 }, previous: { status: 'FAIL' } });
    await ledger.recordFailure(request('evt-fail'), 'late failure of a completed key');
    expect(await ledger.get('points', 'evt-fail')).toMatchObject({
      status: 'SUCCESS',
      attempt: 3,
      result: '"done"',
    });
  });

  for (const foundRows of [true, false]) {
    it(`checks owner and attempt on every leased write (CLIENT_FOUND_ROWS ${foundRows ? 'on' : 'off'})`, async () => {
      const flagged = testPool(service.url, { foundRows, size: 2 });
      try {
        let now = 1_000_000;
        const ledger = await ledgerOn(flagged, { clock: () => now });
        const first = await ledger.claim(request('evt-lease'));
        if (first.status !== 'acquired') throw new Error(`expected acquired, got ${first.status}`);
        expect((await ledger.claim(request('evt-lease', { brokerId: 'b2' }))).status).toBe('busy');
        // same clock value: the UPDATE changes nothing, yet the owner still matches
        const renewed = await ledger.renew(first.claim, 30_000);
        expect(renewed.leaseUntil.getTime()).toBe(now + 30_000);
        now += 30_001;
        const second = await ledger.claim(request('evt-lease', { brokerId: 'b2' }));
        expect(second).toMatchObject({ status: 'reclaimed', claim: { attempt: 2 } });
        if (second.status !== 'reclaimed') throw new Error('expected reclaimed');
        await expect(ledger.complete(first.claim, null)).rejects.toBeInstanceOf(LeaseLostError);
        await expect(ledger.renew(first.claim, 30_000)).rejects.toBeInstanceOf(LeaseLostError);
        await expect(ledger.fail(first.claim, 'stale')).rejects.toBeInstanceOf(LeaseLostError);
        await expect(ledger.release(first.claim)).rejects.toBeInstanceOf(LeaseLostError);
        await ledger.complete(second.claim, '"done"');
        expect(await ledger.get('points', 'evt-lease')).toMatchObject({
          status: 'SUCCESS',
          attempt: 2,
          result: '"done"',
          leaseUntil: null,
        });
        expect((await ledger.claim(request('evt-lease'))).status).toBe('duplicate');
        const other = await ledger.claim(request('evt-release'));
        if (other.status !== 'acquired') throw new Error('expected acquired');
        await ledger.release(other.claim);
        expect(await ledger.get('points', 'evt-release')).toBeUndefined();
      } finally {
        await flagged.end();
      }
    });
  }

  it('on a session that is not strict, stores an oversized topic as its digest, never truncated', async () => {
    const conn = await pool.getConnection();
    try {
      await conn.query("SET SESSION sql_mode = ''");
      const ledger = await ledgerOn(conn);
      const topic = 't'.repeat(2000);
      expect((await ledger.claim(request('evt-topic', { topic }))).status).toBe('acquired');
      expect(await ledger.get('points', 'evt-topic')).toMatchObject({ topic: fitMetadata(topic) });
    } finally {
      await conn.query('SET SESSION sql_mode = DEFAULT');
      conn.release();
    }
  });

  it("joins the caller's open transaction: the claim commits or rolls back with the caller's own writes", async () => {
    await pool.query('CREATE TABLE IF NOT EXISTS t_points_ledger_test (id VARCHAR(64) PRIMARY KEY)');
    const conn = await pool.getConnection();
    try {
      const ledger = await ledgerOn(conn);
      await conn.query('START TRANSACTION');
      await conn.execute('INSERT INTO t_points_ledger_test (id) VALUES (?)', ['joined-rollback']);
      expect((await ledger.transaction(request('joined-1'), () => null)).status).toBe('acquired');
      await conn.query('ROLLBACK');
      expect(await ledger.get('points', 'joined-1')).toBeUndefined();

      await conn.query('START TRANSACTION');
      await conn.execute('INSERT INTO t_points_ledger_test (id) VALUES (?)', ['joined-commit']);
      expect((await ledger.transaction(request('joined-2'), () => null)).status).toBe('acquired');
      // a failing handler rolls back to the savepoint only: the caller's insert stays
      await expect(
        ledger.transaction(request('joined-3'), () => {
          throw new Error('handler failed');
        }),
      ).rejects.toThrow('handler failed');
      await conn.query('COMMIT');
      expect(await ledger.get('points', 'joined-2')).toMatchObject({ status: 'SUCCESS' });
      expect(await ledger.get('points', 'joined-3')).toBeUndefined();
      const [rowsWritten] = await pool.query<RowDataPacket[]>(
        "SELECT id FROM t_points_ledger_test WHERE id IN ('joined-rollback', 'joined-commit') ORDER BY id",
      );
      expect(rowsWritten.map((r) => r.id as string)).toEqual(['joined-commit']);
      // outside a transaction it opens and commits its own
      expect((await ledger.transaction(request('joined-4'), () => null)).status).toBe('acquired');
      expect(await ledger.get('points', 'joined-4')).toMatchObject({ status: 'SUCCESS' });
    } finally {
      conn.release();
    }
  });

  it('turns driver failures into LedgerUnavailableError with the cause', async () => {
    const table = uniqueTable();
    const ledger = await ledgerOn(pool, { table });
    await pool.query(`DROP TABLE \`${table}\``);
    const error: unknown = await ledger.claim(request('evt-x')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect((error as Error).cause).toMatchObject({ code: 'ER_NO_SUCH_TABLE' });
    await expect(ledger.transaction(request('evt-x'), () => null)).rejects.toBeInstanceOf(
      LedgerUnavailableError,
    );
    const [result] = await pool.query<ResultSetHeader>('DO 0');
    expect(result.affectedRows).toBe(0);
  });
});
