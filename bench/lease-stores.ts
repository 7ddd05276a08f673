/**
 * The ledgers of the `leases` suite, opened the same way by the owner (bench/leases.ts) and by the
 * rival process (bench/lease-rival.ts): one namespace per run, on each backend's real service.
 */
import mysql from 'mysql2/promise';
import pg from 'pg';
import { createClient } from 'redis';
import { resolveServiceUrl } from '../src/cli/connection.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { MysqlLedger } from '../src/ledger/mysql/mysql-ledger.js';
import { PostgresLedger } from '../src/ledger/postgres/postgres-ledger.js';
import { RedisLedger } from '../src/ledger/redis/redis-ledger.js';
import { fromNodeRedis } from '../src/ledger/redis/redis-like.js';
import { SqliteLedger } from '../src/ledger/sqlite/sqlite-ledger.js';

export const LEASE_BACKENDS = ['sqlite', 'postgres', 'mysql', 'redis'] as const;
export type LeaseBackend = (typeof LEASE_BACKENDS)[number];

/** Where a run's ledger lives: the SQLite file, or the table / schema / key prefix on a server. */
export interface LeaseNamespace {
  readonly backend: LeaseBackend;
  /** The SQLite file's path, else a fresh name (`oncemq_lease_<hex>`). */
  readonly name: string;
}

export interface OpenLedger {
  readonly ledger: Ledger;
  readonly close: () => Promise<void>;
}

/** Opens the namespace's ledger with a connection of its own (one per process: owner, rival). */
export async function openLeaseLedger(namespace: LeaseNamespace): Promise<OpenLedger> {
  const { backend, name } = namespace;
  switch (backend) {
    case 'sqlite': {
      const ledger = new SqliteLedger({ database: name });
      await ledger.init();
      return { ledger, close: () => ledger.close() };
    }
    case 'postgres': {
      const pool = new pg.Pool({ connectionString: resolveServiceUrl('postgres').url, max: 2 });
      await pool.query(`CREATE SCHEMA IF NOT EXISTS "${name}"`);
      const ledger = new PostgresLedger({ pool, schema: name });
      await ledger.init();
      return {
        ledger,
        close: async () => {
          await ledger.close();
          await pool.end();
        },
      };
    }
    case 'mysql': {
      const pool = mysql.createPool({ uri: resolveServiceUrl('mysql').url, connectionLimit: 2 });
      const ledger = new MysqlLedger<mysql.PoolConnection>({ pool, table: name });
      await ledger.init();
      return {
        ledger,
        close: async () => {
          await ledger.close();
          await pool.end();
        },
      };
    }
    case 'redis': {
      const client = createClient({ url: process.env.ONCEMQ_REDIS_URL ?? 'redis://127.0.0.1:6379' });
      client.on('error', () => undefined);
      await client.connect();
      const ledger = new RedisLedger({ client: fromNodeRedis(client), prefix: name });
      await ledger.init();
      return {
        ledger,
        close: async () => {
          await ledger.close();
          await client.quit();
        },
      };
    }
  }
}

/** Drops what a run made on a server (the SQLite file goes with its directory). */
export async function dropLeaseNamespace(namespace: LeaseNamespace): Promise<void> {
  const { backend, name } = namespace;
  if (backend === 'postgres') {
    const client = new pg.Client({ connectionString: resolveServiceUrl('postgres').url });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    await client.end();
  } else if (backend === 'mysql') {
    const conn = await mysql.createConnection({ uri: resolveServiceUrl('mysql').url });
    await conn.query(`DROP TABLE IF EXISTS ${name}, ${name}_schema`);
    await conn.end();
  } else if (backend === 'redis') {
    const client = createClient({ url: process.env.ONCEMQ_REDIS_URL ?? 'redis://127.0.0.1:6379' });
    await client.connect();
    for await (const keys of client.scanIterator({ MATCH: `${name}:*`, COUNT: 1000 })) {
      if (keys.length > 0) await client.del(keys);
    }
    await client.quit();
  }
}
