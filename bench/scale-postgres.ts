/**
 * The `scale` suite's PostgreSQL targets, plain and daily-partitioned, in a database of their own
 * (`oncemq_scale` unless flagged): the rows of scale-rows.ts loaded by `INSERT … SELECT FROM
 * generate_series` in chunks of a million, one statement each, generated inside the server.
 */
import pg from 'pg';
import { PostgresLedger } from '../src/ledger/postgres/postgres-ledger.js';
import { partitionName } from '../src/ledger/postgres/postgres-partitions.js';
import { quoteIdentifier } from '../src/ledger/sql-identifier.js';
import { DAY_MS, SCALE_DAYS, SCALE_GROUPS, SPREAD } from './scale-rows.js';
import type { FillMethod, LockWaits, ScaleTarget, TableBytes } from './scale-target.js';

/** Rows one load statement inserts. */
const CHUNK = 1_000_000;

const groups = `ARRAY[${SCALE_GROUPS.map((g) => `'${g.group}'`).join(', ')}]`;
const topics = `ARRAY[${SCALE_GROUPS.map((g) => `'${g.topic}'`).join(', ')}]`;

/** Rows $1 to $2 of scale-rows.ts, before the span's end $3 (epoch ms). */
function loadSql(t: string): string {
  return `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until,
      broker_id, topic, remark, result, created_at, updated_at)
    SELECT (${groups})[g % 4 + 1], md5('k' || g)::uuid::text,
      CASE WHEN g % 10000 = 7 THEN 'PROCESSING' WHEN g % 100 = 3 THEN 'FAIL' ELSE 'SUCCESS' END,
      md5('f' || g) || md5('F' || g),
      CASE WHEN g % 10000 = 7 THEN md5('o' || g)::uuid::text || '.1' END,
      CASE WHEN g % 100 = 3 THEN 2 ELSE 1 END,
      CASE WHEN g % 10000 = 7 THEN ts + interval '30 seconds' END,
      'msg-' || g, (${topics})[g % 4 + 1],
      CASE WHEN g % 100 = 3 THEN 'Error: the payment service timed out' END,
      CASE WHEN g % 10 = 1 THEN '{"balance":' || (g % 1000) || '}' END,
      CASE WHEN g % 100 = 3 THEN ts - interval '1 minute' ELSE ts END, ts
    FROM (SELECT g, to_timestamp(($3::float8 - floor((g * ${SPREAD}::float8 - floor(g * ${SPREAD}::float8))
        * ${SCALE_DAYS * DAY_MS})) / 1000) AS ts
      FROM generate_series($1::bigint, $2::bigint) AS g) AS s`;
}

/** The database name in a connection string replaced by `database`. */
function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Opens the PostgreSQL targets' database (dropped first if a run left it) and its pool. */
export async function openPostgresScale(
  url: string,
  database: string,
  poolSize: number,
): Promise<{ pool: pg.Pool; drop: () => Promise<void> }> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(database)}`);
    await admin.query(`CREATE DATABASE ${quoteIdentifier(database)}`);
  } finally {
    await admin.end();
  }
  const pool = new pg.Pool({ connectionString: withDatabase(url, database), max: poolSize });
  pool.on('error', () => undefined);
  return {
    pool,
    drop: async () => {
      await pool.end();
      const again = new pg.Client({ connectionString: url });
      await again.connect();
      try {
        await again.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(database)} WITH (FORCE)`);
      } finally {
        await again.end();
      }
    },
  };
}

/** A PostgreSQL target on schema `schema` of the scale database; `partitioned` for the daily ledger. */
export function postgresScaleTarget(pool: pg.Pool, schema: string, partitioned: boolean): ScaleTarget {
  const qualified = (table: string): string => `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;

  /** The table's primary key and other indexes as DDL, to drop them before a load and build them after. */
  const indexDdl = async (table: string): Promise<{ drop: string[]; create: string[] }> => {
    const t = qualified(table);
    const { rows: keys } = await pool.query<{ name: string; def: string }>(
      `SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
       WHERE conrelid = $1::regclass AND contype = 'p'`,
      [t],
    );
    const { rows: indexes } = await pool.query<{ name: string; def: string }>(
      `SELECT indexname AS name, indexdef AS def FROM pg_indexes
       WHERE schemaname = $1 AND tablename = $2 AND indexname <> ALL($3::text[])`,
      [schema, table, keys.map((k) => k.name)],
    );
    return {
      drop: [
        ...indexes.map((i) => `DROP INDEX ${quoteIdentifier(schema)}.${quoteIdentifier(i.name)}`),
        ...keys.map((k) => `ALTER TABLE ${t} DROP CONSTRAINT ${quoteIdentifier(k.name)}`),
      ],
      // A partitioned table's index reads `ON ONLY`; built on the parent it builds every partition's.
      create: [
        ...keys.map((k) => `ALTER TABLE ${t} ADD CONSTRAINT ${quoteIdentifier(k.name)} ${k.def}`),
        ...indexes.map((i) => i.def.replace(' ON ONLY ', ' ON ')),
      ],
    };
  };

  return {
    name: partitioned ? 'postgres-daily' : 'postgres',
    ledger: (table) =>
      new PostgresLedger({ pool, schema, table, ...(partitioned ? { partitioned: 'daily' as const } : {}) }),
    async prepare(table, endMs) {
      if (!partitioned) return;
      const t = qualified(table);
      for (let day = SCALE_DAYS; day >= 1; day--) {
        const start = endMs - day * DAY_MS;
        const from = new Date(start).toISOString();
        const to = new Date(start + DAY_MS).toISOString();
        await pool.query(
          `CREATE TABLE IF NOT EXISTS ${qualified(partitionName(table, start))} PARTITION OF ${t}
           FOR VALUES FROM ('${from}') TO ('${to}')`,
        );
      }
    },
    async fill(table, from, to, endMs, method: FillMethod) {
      const client = await pool.connect();
      try {
        await client.query(`SET maintenance_work_mem = '1GB'`);
        const ddl = method === 'rebuild' ? await indexDdl(table) : { drop: [], create: [] };
        for (const statement of ddl.drop) await client.query(statement);
        for (let start = from; start < to; start += CHUNK) {
          const end = Math.min(to, start + CHUNK) - 1;
          await client.query(loadSql(qualified(table)), [start, end, endMs]);
        }
        for (const statement of ddl.create) await client.query(statement);
      } finally {
        client.release();
      }
    },
    async clear(table) {
      await pool.query(`TRUNCATE ${qualified(table)}`);
    },
    async analyze(table) {
      await pool.query(`VACUUM ANALYZE ${qualified(table)}`);
    },
    async bytes(table): Promise<TableBytes> {
      const { rows } = await pool.query<{ table: string; indexes: string }>(
        `SELECT COALESCE(SUM(pg_table_size(oid)), 0) AS table, COALESCE(SUM(pg_indexes_size(oid)), 0) AS indexes
         FROM pg_class WHERE relkind = 'r' AND (oid = $1::regclass
           OR oid IN (SELECT relid FROM pg_partition_tree($1::regclass) WHERE isleaf))`,
        [qualified(table)],
      );
      return { tableBytes: Number(rows[0]?.table ?? 0), indexBytes: Number(rows[0]?.indexes ?? 0) };
    },
    async count(table) {
      const { rows } = await pool.query<{ n: string }>(`SELECT COUNT(*) AS n FROM ${qualified(table)}`);
      return Number(rows[0]?.n ?? 0);
    },
    async lockWaits(): Promise<LockWaits> {
      const { rows } = await pool.query<{ waiting: number; longest: number }>(
        `SELECT COUNT(*)::int AS waiting,
           COALESCE(MAX(EXTRACT(EPOCH FROM clock_timestamp() - query_start) * 1000), 0)::float8 AS longest
         FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return { waiting: rows[0]?.waiting ?? 0, longestMs: rows[0]?.longest ?? 0 };
    },
    async deadlocks() {
      const { rows } = await pool.query<{ n: string }>(
        `SELECT deadlocks AS n FROM pg_stat_database WHERE datname = current_database()`,
      );
      return Number(rows[0]?.n ?? 0);
    },
    async drop() {
      await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`);
    },
    close: () => Promise.resolve(),
  };
}
