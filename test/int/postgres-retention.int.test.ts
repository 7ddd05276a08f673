import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { RetryPolicy, startRetention, type RetentionProgress } from 'oncemq';
import { PostgresLedger } from 'oncemq/postgres';
import { pointsRequest } from '../support/points.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';

const service = await findPostgres();
const OLD_ROWS = 1_000_000;
const STUCK_ROWS = 100;
const NEW_CLAIMS = 300;

describe.skipIf(!service.available)('retention on a PostgreSQL ledger', () => {
  let pool: pg.Pool;
  let schema: string;
  let ledger: PostgresLedger;

  beforeAll(async () => {
    pool = newPool(service.url, 4);
    schema = scratchSchema();
    ledger = new PostgresLedger({ pool, schema });
    await ledger.init();
  });

  afterAll(async () => {
    await dropSchema(pool, schema);
    await pool.end();
  });

  const count = async (where: string): Promise<number> => {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT COUNT(*)::int AS n FROM "${schema}".oncemq_ledger WHERE ${where}`,
    );
    return rows[0]?.n ?? 0;
  };

  it('deletes 1 million finished rows in bounded batches while claims continue, never touching live PROCESSING rows', async () => {
    await pool.query(
      `INSERT INTO "${schema}".oncemq_ledger (consumer_group, msg_key, status, attempt, broker_id, topic, remark, created_at, updated_at)
       SELECT 'points', 'old-' || g, CASE WHEN g % 10 = 0 THEN 'FAIL' ELSE 'SUCCESS' END, 1, 'b-' || g, 'payments',
              CASE WHEN g % 10 = 0 THEN 'failed long ago' END, now() - interval '30 days', now() - interval '30 days'
       FROM generate_series(1, $1::int) AS g`,
      [OLD_ROWS],
    );
    await pool.query(
      `INSERT INTO "${schema}".oncemq_ledger (consumer_group, msg_key, status, owner, attempt, lease_until, created_at, updated_at)
       SELECT 'points', 'stuck-' || g, 'PROCESSING', 'dead-owner', 1, now() - interval '29 days', now() - interval '30 days', now() - interval '30 days'
       FROM generate_series(1, $1::int) AS g`,
      [STUCK_ROWS],
    );
    await pool.query(`ANALYZE "${schema}".oncemq_ledger`);

    const reports: RetentionProgress[] = [];
    const retention = startRetention(ledger, {
      every: '1h',
      olderThan: '10d',
      batchSize: 20_000,
      retry: RetryPolicy.none(),
      replayMargin: '1d',
      onProgress: (progress) => reports.push(progress),
    });
    const rival = startRetention(ledger, {
      every: '1h',
      olderThan: '10d',
      retry: RetryPolicy.none(),
      replayMargin: 0,
    });

    let acquired = 0;
    const claims = (async () => {
      for (let i = 0; i < NEW_CLAIMS; i++) {
        const result = await ledger.transaction(
          {
            group: 'points',
            key: `new-${i}`,
            fingerprint: null,
            brokerId: `n-${i}`,
            topic: 'payments',
            leaseMs: 30_000,
          },
          () => null,
        );
        if (result.status === 'acquired') acquired++;
      }
    })();
    const [first, second] = await Promise.all([
      retention.runOnce(),
      (async () => {
        while (reports.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
        return rival.runOnce();
      })(),
    ]);
    await claims;
    await Promise.all([retention.stop(), rival.stop()]);

    expect(second).toMatchObject({ skipped: true, deleted: 0 });
    expect(first).toMatchObject({ done: true, skipped: false, deleted: OLD_ROWS });
    expect(first.batches).toBe(OLD_ROWS / 20_000 + 1);
    expect(reports.filter((r) => !r.done).length).toBe(OLD_ROWS / 20_000);
    expect(acquired).toBe(NEW_CLAIMS);
    expect(await count(`msg_key LIKE 'old-%'`)).toBe(0);
    expect(await count(`status = 'PROCESSING'`)).toBe(STUCK_ROWS);
    expect(await count(`msg_key LIKE 'new-%' AND status = 'SUCCESS'`)).toBe(NEW_CLAIMS);
  });

  it('refuses a retention shorter than the retry horizon plus the replay margin', () => {
    expect(() => startRetention(ledger, { olderThan: '1h', retry: RetryPolicy.rocketmq() })).toThrow(
      /retention 1h is shorter than the redelivery horizon/,
    );
  });

  it('on a daily-partitioned ledger, drops whole expired day partitions and keeps their live rows', async () => {
    const day = 86_400_000;
    const today = Math.floor(Date.now() / day) * day + 12 * 3_600_000;
    let now = today - 10 * day;
    const partitioned = new PostgresLedger({
      pool,
      schema,
      table: 'daily_ledger',
      partitioned: 'daily',
      clock: () => now,
    });
    await partitioned.init();
    const old = Array.from({ length: 1000 }, (_, i) => pointsRequest(`old-${i}`));
    await partitioned.transactionMany(old, (_tx, won) => won.map(() => null));
    await partitioned.claim(pointsRequest('stuck', 1000));
    await partitioned.recordFailure(pointsRequest('failing'), 'first failure');
    now = today - day;
    await partitioned.recordFailure(pointsRequest('failing'), 'failed again yesterday');
    now = today;
    await partitioned.transaction(pointsRequest('fresh'), () => null);

    const partitionsBefore = await pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = '"${schema}".daily_ledger'::regclass`,
    );
    const oldPartition = `daily_ledger_p${new Date(today - 10 * day).toISOString().slice(0, 10).replaceAll('-', '')}`;
    expect(partitionsBefore.rows.map((r) => r.name)).toContain(oldPartition);

    const result = await partitioned.purge({ olderThan: new Date(today - 5 * day), batchSize: 100 });
    expect(result.deleted).toBe(1000);
    const partitionsAfter = await pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = '"${schema}".daily_ledger'::regclass`,
    );
    expect(partitionsAfter.rows.map((r) => r.name)).not.toContain(oldPartition);
    expect(await partitioned.get('points', 'stuck')).toMatchObject({ status: 'PROCESSING' });
    expect(await partitioned.get('points', 'failing')).toMatchObject({ status: 'FAIL', attempt: 2 });
    expect(await partitioned.get('points', 'fresh')).toMatchObject({ status: 'SUCCESS' });
    expect(await partitioned.get('points', 'old-1')).toBeUndefined();
    expect((await partitioned.transaction(pointsRequest('failing'), () => null)).status).toBe('reclaimed');
  });
});
