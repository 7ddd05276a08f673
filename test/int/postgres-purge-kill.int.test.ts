import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from 'oncemq/postgres';
import { buildPackage } from '../support/built-package.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';
import {
  expectExpiredGone,
  expectLiveReplays,
  expectLockTakenOver,
  expectWholeOrGone,
  purgerScript,
  startPurger,
  type KilledRow,
} from '../support/purger-process.js';

const service = await findPostgres();
const DAY = 86_400_000;

/**
 * A retention pass in a process of its own, on the ledger `schema.table`: prints `locked` once the
 * pass runs (it holds the maintenance lock), then a line per batch, until it is killed.
 */
const PURGER = purgerScript(
  `import pg from 'pg';
import { PostgresLedger } from './postgres.js';
const [url, schema, table, partitioned] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: url, max: 3 });
const ledger = new PostgresLedger({ pool, schema, table, partitioned: partitioned === 'daily' ? 'daily' : false, migrate: false });`,
  50,
);

interface Row extends KilledRow {
  readonly consumer_group: string;
  readonly msg_key: string;
  readonly attempt: number;
  readonly result: string | null;
}

/**
 * A retention pass killed with SIGKILL midway: every row it left is exactly as it was (a finished
 * row is deleted whole or not at all, never changed), no row inside the retention is gone, so a
 * replay of any of them is answered `duplicate` with its stored result; the dead purger's
 * maintenance lock is freed by the database when its session ends, and the next pass finishes.
 */
describe.skipIf(!service.available)('a PostgreSQL retention pass killed with kill -9 midway', () => {
  let build: ReturnType<typeof buildPackage>;
  let pool: pg.Pool;
  const schema = scratchSchema('oncemq_kill');

  beforeAll(() => {
    build = buildPackage();
    writeFileSync(join(build.dir, 'purger.mjs'), PURGER);
    pool = newPool(service.url, 4);
  }, 120_000);

  afterAll(async () => {
    await dropSchema(pool, schema);
    await pool.end();
    build.remove();
  });

  const snapshot = async (table: string): Promise<Map<string, Row>> => {
    const { rows } = await pool.query<Omit<Row, 'updated'> & { readonly updated_at: Date }>(
      `SELECT consumer_group, msg_key, status, attempt, result, updated_at FROM "${schema}"."${table}"`,
    );
    return new Map(
      rows.map(({ updated_at, ...row }) => [
        `${row.consumer_group}/${row.msg_key}`,
        { ...row, updated: updated_at.getTime() },
      ]),
    );
  };

  for (const partitioned of [false, 'daily'] as const) {
    it(`leaves every row whole or gone, none live gone, and its lock to the next purger (${partitioned === 'daily' ? 'daily-partitioned' : 'plain'})`, async () => {
      const table = partitioned === 'daily' ? 'daily_ledger' : 'plain_ledger';
      const ledger = new PostgresLedger({ pool, schema, table, partitioned });
      await ledger.init();
      const t = `"${schema}"."${table}"`;
      const today = Math.floor(Date.now() / DAY) * DAY;
      if (partitioned === 'daily') {
        // Two expired days with partitions of their own (dropped whole); older rows fall in the default partition.
        for (const days of [10, 9]) {
          const day = new Date(today - days * DAY).toISOString().slice(0, 10);
          const next = new Date(today - (days - 1) * DAY).toISOString().slice(0, 10);
          await pool.query(
            `CREATE TABLE "${schema}"."${table}_p${day.replaceAll('-', '')}" PARTITION OF ${t} FOR VALUES FROM ('${day}') TO ('${next}')`,
          );
        }
      }
      // Expired finished rows 9 to 12 days old, stuck claims among them, and rows inside the retention.
      await pool.query(
        `INSERT INTO ${t} (consumer_group, msg_key, status, owner, attempt, lease_until, result, created_at, updated_at)
         SELECT 'points', 'old-' || g, CASE WHEN g % 100 = 0 THEN 'PROCESSING' WHEN g % 10 = 0 THEN 'FAIL' ELSE 'SUCCESS' END,
           CASE WHEN g % 100 = 0 THEN 'dead-owner' END, 1, CASE WHEN g % 100 = 0 THEN ts END, '{"old":' || g || '}', ts, ts
         FROM (SELECT g, to_timestamp($1::float8 / 1000 - 86400 * (9 + g % 4) + g % 3600) AS ts FROM generate_series(1, 6000) AS g) AS s`,
        [today],
      );
      await pool.query(
        `INSERT INTO ${t} (consumer_group, msg_key, status, attempt, result, created_at, updated_at)
         SELECT 'points', 'new-' || g, 'SUCCESS', 1, '{"new":' || g || '}', now() - interval '1 hour', now() - interval '1 hour'
         FROM generate_series(1, 2000) AS g`,
      );
      const before = await snapshot(table);
      const cutoff = today - 8 * DAY;
      const olderThan = String(Date.now() - cutoff);
      const file = join(build.dir, 'purger.mjs');
      const args = [service.url, schema, table, partitioned === 'daily' ? 'daily' : 'plain', olderThan];

      // Killed a few batches in (plain) or once the first expired partition is gone (daily).
      const child = await startPurger(file, args, (out) =>
        partitioned === 'daily' ? out.includes('locked') : (out.match(/batch/g)?.length ?? 0) >= 5,
      );
      if (partitioned === 'daily') {
        const first = `${table}_p${new Date(today - 10 * DAY).toISOString().slice(0, 10).replaceAll('-', '')}`;
        for (let i = 0; i < 2000; i++) {
          const { rows } = await pool.query(`SELECT 1 FROM pg_class WHERE relname = $1`, [first]);
          if (rows.length === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      }
      // While the purger runs, its lock keeps a second instance out.
      expect(await ledger.tryMaintenanceLock()).toBeUndefined();
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));

      expectWholeOrGone(before, await snapshot(table), cutoff);
      await expectLiveReplays(ledger, 2000);

      // The dead session's lock is gone once PostgreSQL has ended it; the next pass finishes the work.
      await expectLockTakenOver(ledger);
      await ledger.purge({ olderThan: new Date(cutoff), batchSize: 1000 });
      expectExpiredGone(before, await snapshot(table), cutoff);
    }, 60_000);
  }
});
