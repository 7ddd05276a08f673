/**
 * The PostgreSQL side of the example that the postgres and memory suites share: a scratch schema with
 * the points table, and the raw consumer's batch statements (the same SQL `raw:batch` runs).
 */
import type pg from 'pg';
import { PostgresLedger } from '../src/ledger/postgres/postgres-ledger.js';
import { USERS } from './sql.js';

/** The raw batch's statements on `schema`: claim the batch's keys in `raw_ledger`, credit the winners. */
export interface RawBatchSql {
  /** `$1` keys, `$2` broker ids, `$3` the time; answers a row per key won. */
  readonly insert: string;
  /** `$1` the user, `$2` how many payments of 100 points. */
  readonly creditMany: string;
}

/** Makes `schema` with the points table (every user at 0) and an empty `raw_ledger` shaped as the ledger's table. */
export async function createPointsSchema(pool: pg.Pool, schema: string): Promise<RawBatchSql> {
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(`CREATE TABLE "${schema}".points (user_id text PRIMARY KEY, balance bigint NOT NULL)`);
  await pool.query(
    `INSERT INTO "${schema}".points SELECT 'user-' || g, 0 FROM generate_series(0, ${USERS - 1}) AS g`,
  );
  // The raw baseline writes the same row shape into an identical table (same columns and indexes).
  await new PostgresLedger({ pool, schema, table: 'raw_ledger' }).init();
  return {
    insert: `INSERT INTO "${schema}".raw_ledger (consumer_group, msg_key, status, fingerprint, owner, attempt, broker_id, topic, created_at, updated_at)
        SELECT 'points', k, 'SUCCESS', NULL, NULL, 1, b, 'payments', $3, $3 FROM unnest($1::text[], $2::text[]) AS t (k, b)
        ON CONFLICT (consumer_group, msg_key) DO NOTHING RETURNING msg_key`,
    creditMany: `UPDATE "${schema}".points SET balance = balance + 100 * $2::int WHERE user_id = $1`,
  };
}
