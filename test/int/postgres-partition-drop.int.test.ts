import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from 'oncemq/postgres';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';
import { liveRowsSelect } from '../support/internal.js';

const service = await findPostgres();
const DAY = 86_400_000;
const ROWS = 100_000;

interface Plan {
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  'Actual Rows': number;
}

/**
 * The rows a partition drop keeps are found through the indexes, not by reading the whole day: that
 * lookup runs while the ledger is locked exclusively, so its cost is what every claim waits.
 */
describe.skipIf(!service.available)('the daily ledger finds the live rows of an expiring day', () => {
  let pool: pg.Pool;
  const schema = scratchSchema('oncemq_drop');

  beforeAll(async () => {
    pool = newPool(service.url, 2);
    await new PostgresLedger({ pool, schema, table: 'daily', partitioned: 'daily' }).init();
  });

  afterAll(async () => {
    await dropSchema(pool, schema);
    await pool.end();
  });

  it(`reads a few index pages of a day of ${ROWS} finished rows, not the day`, async () => {
    const today = Math.floor(Date.now() / DAY) * DAY;
    const day = new Date(today - 10 * DAY).toISOString().slice(0, 10);
    const part = `"${schema}"."daily_p${day.replaceAll('-', '')}"`;
    await pool.query(
      `CREATE TABLE ${part} PARTITION OF "${schema}".daily FOR VALUES FROM ('${day}') TO ('${new Date(today - 9 * DAY).toISOString().slice(0, 10)}')`,
    );
    await pool.query(
      `INSERT INTO ${part} (consumer_group, msg_key, status, owner, lease_until, attempt, created_at, updated_at)
       SELECT 'points', 'k-' || g, CASE WHEN g % 10000 = 7 THEN 'PROCESSING' ELSE 'SUCCESS' END,
         CASE WHEN g % 10000 = 7 THEN 'owner' END, CASE WHEN g % 10000 = 7 THEN $1::timestamptz END, 1, $1, $1
       FROM generate_series(1, ${ROWS}) AS g`,
      [new Date(today - 10 * DAY + 3_600_000)],
    );
    await pool.query(`ANALYZE ${part}`);
    const explain = liveRowsSelect(part).replace('$1', `'${new Date(today - 8 * DAY).toISOString()}'`);
    const { rows } = await pool.query<{ 'QUERY PLAN': { Plan: Plan }[] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${explain}`,
    );
    const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
    expect(plan?.['Actual Rows']).toBe(ROWS / 10_000);
    // The whole (status, updated_at) index of the day is some 500 pages; the live rows' lookup a few.
    expect((plan?.['Shared Hit Blocks'] ?? 0) + (plan?.['Shared Read Blocks'] ?? 0)).toBeLessThan(60);
  });
});
