import type { PoolConnection, RowDataPacket } from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, PermanentError } from 'oncemq';
import { MysqlLedger } from 'oncemq/mysql';
import { ledgerTables, mysqlRequest, mysqlService, testPool, uniqueTable } from '../support/mysql.js';

const service = await mysqlService();

const request = mysqlRequest;

describe.skipIf(!service.available)(
  'MysqlLedger on MariaDB: inspection, maintenance, migrations, names',
  () => {
    const pool = testPool(service.url, { size: 8 });
    const ledgers = ledgerTables(pool);
    const ledgerOn = ledgers.open;
    const tables = ledgers.tables;

    afterAll(async () => {
      await ledgers.drop();
      await pool.end();
    });

    it('lists stuck and failed claims and resets them, refusing a SUCCESS row unless forced', async () => {
      let now = 5_000_000;
      const ledger = await ledgerOn(pool, { clock: () => now });
      await ledger.claim(request('stuck', { leaseMs: 1000 }));
      await ledger.claim(request('running', { leaseMs: 60_000 }));
      await ledger.recordFailure(request('failed'), 'db down');
      await ledger.recordFailure(request('failed-other', { group: 'mail' }), 'smtp down');
      await ledger.transaction(request('done'), () => null);
      now += 5000;
      const stuck = await ledger.list({ leaseExpiredBefore: new Date(now) });
      expect(stuck.map((r) => r.key)).toEqual(['stuck']);
      const failed = await ledger.list({ status: 'FAIL', group: 'points' });
      expect(failed.map((r) => [r.key, r.remark])).toEqual([['failed', 'db down']]);
      expect((await ledger.list({ limit: 2 })).length).toBe(2);
      expect(await ledger.reset('points', 'stuck')).toBe(true);
      expect(await ledger.reset('points', 'failed')).toBe(true);
      expect(await ledger.reset('points', 'done')).toBe(false);
      expect(await ledger.get('points', 'done')).toBeDefined();
      expect(await ledger.reset('points', 'done', { force: true })).toBe(true);
      expect(await ledger.reset('points', 'never-seen')).toBe(false);
      expect((await ledger.claim(request('stuck'))).status).toBe('acquired');
    });

    it('purges finished rows older than the cut-off in bounded batches and never a PROCESSING row', async () => {
      let now = 10_000_000;
      const ledger = await ledgerOn(pool, { clock: () => now });
      for (let i = 0; i < 25; i++) await ledger.transaction(request(`old-${i}`), () => null);
      await ledger.recordFailure(request('old-failed'), 'x');
      await ledger.claim(request('old-processing', { leaseMs: 1 }));
      now += 60_000;
      await ledger.transaction(request('recent'), () => null);
      const purged = await ledger.purge({ olderThan: new Date(now - 1000), batchSize: 10 });
      expect(purged).toEqual({ deleted: 26, batches: 3 });
      expect(await ledger.get('points', 'old-processing')).toBeDefined();
      expect(await ledger.get('points', 'recent')).toBeDefined();
      expect(await ledger.get('points', 'old-3')).toBeUndefined();
      const bounded = await ledger.purge({ olderThan: new Date(now + 1), batchSize: 1, maxBatches: 1 });
      expect(bounded).toEqual({ deleted: 1, batches: 1 });
    });

    it('names one maintenance lock per table: a ledger on another table takes its own', async () => {
      const a = await ledgerOn(pool);
      const held = await a.tryMaintenanceLock();
      expect(held).toBeDefined();
      const independent = await (await ledgerOn(pool)).tryMaintenanceLock();
      expect(independent).toBeDefined();
      await independent?.release();
      await held?.release();
    });

    it('qualifies the table with the configured database, and names one maintenance lock per physical table', async () => {
      const table = uniqueTable();
      tables.push(table);
      const [current] = await pool.query<RowDataPacket[]>('SELECT DATABASE() AS db');
      const database = String(current[0]?.db);
      const qualified = new MysqlLedger({ pool, database, table });
      expect(qualified.table).toBe(`\`${database}\`.\`${table}\``);
      await qualified.init();
      expect((await qualified.claim(request('evt-db'))).status).toBe('acquired');
      const conn = await pool.getConnection();
      try {
        const onConnection = new MysqlLedger({ connection: conn, table });
        await onConnection.init();
        const held = await onConnection.tryMaintenanceLock();
        expect(held).toBeDefined();
        // the same table named with and without its database: one lock
        expect(await qualified.tryMaintenanceLock()).toBeUndefined();
        const sameTable = new MysqlLedger({ pool, table });
        await sameTable.init();
        expect(await sameTable.tryMaintenanceLock()).toBeUndefined();
        await held?.release();
        const after = await sameTable.tryMaintenanceLock();
        expect(after).toBeDefined();
        await after?.release();
      } finally {
        conn.release();
      }
    });

    it('migrates idempotently: concurrent and repeated init leave one version row and one table', async () => {
      const table = uniqueTable();
      tables.push(table);
      const ledgers = Array.from({ length: 4 }, () => new MysqlLedger({ pool, table }));
      await Promise.all(ledgers.map((l) => l.init()));
      await new MysqlLedger({ pool, table }).init();
      const [versions] = await pool.query<RowDataPacket[]>(`SELECT version FROM \`${table}_schema\``);
      expect(versions.map((v) => v.version as number)).toEqual([1]);
      const [indexes] = await pool.query<RowDataPacket[]>(`SHOW INDEX FROM \`${table}\``);
      const names = new Set(indexes.map((i) => i.Key_name as string));
      expect(names).toEqual(new Set(['PRIMARY', 'status_updated', 'status_lease']));
    });

    it('refuses hostile or oversized table and database names at construction', async () => {
      for (const table of ['x; DROP TABLE y', 'a`b', 'ledger"', 'a.b', '', 'x'.repeat(58), '1abc']) {
        expect(() => new MysqlLedger({ pool, table })).toThrow(ConfigError);
      }
      expect(() => new MysqlLedger({ pool, database: 'test`; DROP DATABASE test; --' })).toThrow(ConfigError);
      const connection = await pool.getConnection();
      expect(() => new MysqlLedger<PoolConnection>({ pool, connection })).toThrow(ConfigError);
      connection.release();
      expect(() => new MysqlLedger<PoolConnection>({})).toThrow(ConfigError);
      expect(() => new MysqlLedger({ pool, lockRetries: -1 })).toThrow(ConfigError);
    });

    it('stores SQL metacharacters, NUL-free unicode and 255-byte keys verbatim, and refuses longer keys instead of truncating', async () => {
      const ledger = await ledgerOn();
      const keys = ["'; DROP TABLE points; --", 'emoji-🎉-ключ', '\\%_', 'k'.repeat(255)];
      for (const key of keys) {
        expect((await ledger.claim(request(key))).status).toBe('acquired');
        expect((await ledger.get('points', key))?.key).toBe(key);
      }
      await expect(ledger.claim(request('k'.repeat(256)))).rejects.toBeInstanceOf(PermanentError);
      await expect(ledger.transaction(request('é'.repeat(128)), () => null)).rejects.toBeInstanceOf(
        PermanentError,
      );
    });
  },
);
