import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { findService, type Service } from './services.js';

/** The PostgreSQL service of the integration suites (ONCEMQ_POSTGRES_URL, else the loopback default). */
export function findPostgres(): Promise<Service> {
  return findService({
    variable: 'ONCEMQ_POSTGRES_URL',
    defaultUrl: 'postgres://postgres@127.0.0.1:5432/test',
  });
}

/** A fresh schema name for one test; drop it with {@link dropSchema}. */
export function scratchSchema(prefix = 'oncemq_t'): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export function newPool(url: string, max = 2): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}

export async function dropSchema(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}
