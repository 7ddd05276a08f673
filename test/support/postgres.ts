import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Ledger } from 'oncemq';
import type { LedgerInstanceOptions, LedgerNamespace } from 'oncemq/conformance';
import type { PgClientLike } from 'oncemq/postgres';
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

/**
 * A conformance namespace on a fresh schema with an `effects` table. `ledgerOn` builds each
 * instance on a pool of its own, so instances race on separate connections; `teardown` drops the
 * schema, ends the pools and then runs `afterTeardown`.
 */
export async function postgresNamespace(
  url: string,
  ledgerOn: (pool: pg.Pool, schema: string, options: LedgerInstanceOptions) => Ledger<PgClientLike>,
  afterTeardown: () => Promise<void> = () => Promise.resolve(),
): Promise<LedgerNamespace<PgClientLike>> {
  const schema = scratchSchema();
  const admin = newPool(url, 1);
  await admin.query(`CREATE SCHEMA "${schema}"`);
  await admin.query(`CREATE TABLE "${schema}".effects (key text NOT NULL)`);
  const pools: pg.Pool[] = [admin];
  return {
    async open(options = {}) {
      const pool = newPool(url);
      pools.push(pool);
      const ledger = ledgerOn(pool, schema, options);
      await ledger.init();
      return ledger;
    },
    effect: {
      apply: async (tx, key) => {
        await tx.query(`INSERT INTO "${schema}".effects (key) VALUES ($1)`, [key]);
      },
      count: async (key) => {
        const { rows } = await admin.query<{ n: number }>(
          `SELECT COUNT(*)::int AS n FROM "${schema}".effects WHERE key = $1`,
          [key],
        );
        return rows[0]?.n ?? 0;
      },
    },
    async teardown() {
      await dropSchema(admin, schema);
      await Promise.all(pools.map((pool) => pool.end()));
      await afterTeardown();
    },
  };
}

/** A pool on a fresh schema holding the payment-to-points `points` table, with its write and read. */
export interface PointsSchema {
  readonly pool: pg.Pool;
  readonly schema: string;
  /** Adds points to a user through `client`, a claim's transaction. */
  readonly addPoints: (client: PgClientLike, userId: string, amount: number) => Promise<unknown>;
  readonly balance: (userId: string) => Promise<number>;
  /** Drops the schema and ends the pool. */
  readonly close: () => Promise<void>;
}

export async function pointsSchema(url: string, poolSize: number): Promise<PointsSchema> {
  const pool = newPool(url, poolSize);
  const schema = scratchSchema();
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(`CREATE TABLE "${schema}".points (user_id text PRIMARY KEY, balance int NOT NULL)`);
  return {
    pool,
    schema,
    addPoints: (client, userId, amount) =>
      client.query(
        `INSERT INTO "${schema}".points (user_id, balance) VALUES ($1, $2)
         ON CONFLICT (user_id) DO UPDATE SET balance = points.balance + excluded.balance`,
        [userId, amount],
      ),
    balance: async (userId) => {
      const { rows } = await pool.query<{ balance: number }>(
        `SELECT balance FROM "${schema}".points WHERE user_id = $1`,
        [userId],
      );
      return rows[0]?.balance ?? 0;
    },
    close: async () => {
      await dropSchema(pool, schema);
      await pool.end();
    },
  };
}
