import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import type { ClaimRequest } from 'oncemq';
import { MysqlLedger } from 'oncemq/mysql';
import { findService, type Service } from './services.js';

export const MYSQL_SERVICE = { variable: 'ONCEMQ_MYSQL_URL', defaultUrl: 'mysql://root@127.0.0.1:3306/test' };

export function mysqlService(): Promise<Service> {
  return findService(MYSQL_SERVICE);
}

/** A pool on the test server; `foundRows: false` clears mysql2's default CLIENT_FOUND_ROWS flag. */
export function testPool(url: string, options: { foundRows?: boolean; size?: number } = {}): mysql.Pool {
  return mysql.createPool({
    uri: url,
    connectionLimit: options.size ?? 8,
    ...(options.foundRows === false ? { flags: ['-FOUND_ROWS'] } : {}),
  });
}

/** A table name no other test uses. */
export function uniqueTable(prefix = 'ledger'): string {
  return `t_${prefix}_${randomBytes(5).toString('hex')}`;
}

/** Drops a test table and its schema-version table. */
export async function dropLedgerTables(pool: mysql.Pool, table: string): Promise<void> {
  await pool.query(`DROP TABLE IF EXISTS \`${table}\`, \`${table}_schema\``);
}

/**
 * Initialized ledgers on fresh tables (or a given one) of `pool`, on the pool or on one of its
 * connections; `drop()` drops every table they used.
 */
export function ledgerTables(pool: mysql.Pool) {
  const tables: string[] = [];
  return {
    tables,
    open: async (
      target: mysql.Pool | mysql.PoolConnection = pool,
      extra: { clock?: () => number; table?: string } = {},
    ): Promise<MysqlLedger<mysql.PoolConnection>> => {
      const table = extra.table ?? uniqueTable();
      if (!tables.includes(table)) tables.push(table);
      const ledger =
        'release' in target
          ? new MysqlLedger<mysql.PoolConnection>({ connection: target, ...extra, table })
          : new MysqlLedger<mysql.PoolConnection>({ pool: target, ...extra, table });
      await ledger.init();
      return ledger;
    },
    drop: async (): Promise<void> => {
      for (const table of tables) await dropLedgerTables(pool, table);
    },
  };
}

/** A claim request of group `points` for `key` with fingerprint `fp-1`, broker id `b1`. */
export function mysqlRequest(key: string, extra: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    group: 'points',
    key,
    fingerprint: 'fp-1',
    brokerId: 'b1',
    topic: 'payments',
    leaseMs: 30_000,
    ...extra,
  };
}
