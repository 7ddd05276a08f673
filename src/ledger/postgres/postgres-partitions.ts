import { pgExecute, pgQuery, type PgClientLike } from './postgres-client.js';
import { quoteIdentifier } from '../sql-identifier.js';

/**
 * The daily-partitioned ledger. A unique key on a partitioned table must include the partition key,
 * so `(group, key)` uniqueness across days is kept by a transaction-scoped advisory lock on a hash of
 * `(group, key)` taken before an insert-if-absent that looks in every partition: concurrent claims
 * of one key serialize on the lock, and the next statement (READ COMMITTED) sees a committed row. A
 * hash collision only makes two keys wait for each other. Retention drops whole day partitions.
 */

const DAY_MS = 86_400_000;

/** Days of partitions created ahead of today (the default partition catches anything beyond). */
export const PARTITIONS_AHEAD = 7;

function day(ms: number): string {
  return new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

export function partitionName(table: string, ms: number): string {
  return `${table}_p${day(ms).replaceAll('-', '')}`;
}

export function partitionedMigration(schema: string, table: string, columns: string): string {
  const t = `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
  return `CREATE TABLE ${t} (
      ${columns},
      PRIMARY KEY (consumer_group, msg_key, created_at)
    ) PARTITION BY RANGE (created_at);
    CREATE INDEX ${quoteIdentifier(`${table}_status_updated`)} ON ${t} (status, updated_at);
    CREATE INDEX ${quoteIdentifier(`${table}_stuck`)} ON ${t} (lease_until) WHERE status = 'PROCESSING';
    CREATE TABLE ${quoteIdentifier(schema)}.${quoteIdentifier(`${table}_default`)} PARTITION OF ${t} DEFAULT;`;
}

/** Statement texts that differ on a partitioned table (no unique index on `(group, key)` alone). */
export function partitionedStatements(t: string) {
  return {
    lock: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))',
    /** Locks the keys of a batch in hash order, so concurrent batches cannot deadlock on the locks. */
    lockMany: `SELECT pg_advisory_xact_lock(h) FROM (
        SELECT hashtextextended(k, 0) AS h FROM unnest($1::text[]) AS k ORDER BY 1) AS s`,
    claim: `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
      SELECT $1::text, $2::text, $3::text, $4::text, $5::text, 1, $6::timestamptz, $7::text, $8::text, $9::timestamptz, $9::timestamptz
      WHERE NOT EXISTS (SELECT FROM ${t} WHERE consumer_group = $1 AND msg_key = $2)`,
    recordFailure: `WITH existing AS (SELECT status FROM ${t} WHERE consumer_group = $1 AND msg_key = $2),
      failed AS (
        UPDATE ${t} SET attempt = attempt + 1, remark = $6, updated_at = $7
        WHERE consumer_group = $1 AND msg_key = $2 AND status = 'FAIL' RETURNING 1)
      INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, remark, created_at, updated_at)
      SELECT $1::text, $2::text, 'FAIL', $3::text, NULL, 1, NULL, $4::text, $5::text, $6::text, $7::timestamptz, $7::timestamptz
      WHERE NOT EXISTS (SELECT FROM existing)`,
    /** Row identity on a partitioned table is (tableoid, ctid): a ctid alone repeats across partitions. */
    purge: `DELETE FROM ${t} USING (
        SELECT tableoid AS part, ctid AS row FROM ${t} WHERE status IN ('SUCCESS', 'FAIL') AND updated_at < $1
        LIMIT $2 FOR UPDATE SKIP LOCKED) AS x
      WHERE ${t}.tableoid = x.part AND ${t}.ctid = x.row`,
    claimMany: `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
      SELECT g, k, 'SUCCESS', f, $4::text, 1, NULL, b, tp, $7, $7
      FROM unnest($1::text[], $2::text[], $3::text[], $5::text[], $6::text[]) WITH ORDINALITY AS i(g, k, f, b, tp, n)
      WHERE NOT EXISTS (SELECT FROM ${t} x WHERE x.consumer_group = i.g AND x.msg_key = i.k)
      ORDER BY n
      ON CONFLICT DO NOTHING
      RETURNING consumer_group, msg_key`,
  };
}

/** The advisory-lock text of one key: any separator works, a collision only makes two keys wait. */
export function keyLockText(group: string, key: string): string {
  return `${group.length}:${group}:${key}`;
}

/** Creates the day partitions from yesterday to {@link PARTITIONS_AHEAD} days ahead, when missing. */
export async function ensurePartitions(
  client: PgClientLike,
  schema: string,
  table: string,
  nowMs: number,
): Promise<void> {
  const t = `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
  const existing = new Set(
    (
      await pgQuery<{ name: string }>(
        client,
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = $1::regclass`,
        [t],
        'listing partitions',
      )
    ).map((row) => row.name),
  );
  for (let offset = -1; offset <= PARTITIONS_AHEAD; offset++) {
    const start = Math.floor(nowMs / DAY_MS) * DAY_MS + offset * DAY_MS;
    const name = partitionName(table, start);
    if (existing.has(name)) continue;
    await pgQuery(client, 'SAVEPOINT oncemq_partition', [], 'creating a partition');
    try {
      await pgQuery(
        client,
        `CREATE TABLE ${quoteIdentifier(schema)}.${quoteIdentifier(name)} PARTITION OF ${t}
         FOR VALUES FROM ('${day(start)} 00:00:00+00') TO ('${day(start + DAY_MS)} 00:00:00+00')`,
        [],
        'creating a partition',
      );
      await pgQuery(client, 'RELEASE SAVEPOINT oncemq_partition', [], 'creating a partition');
    } catch {
      // The default partition already holds rows of that day: they stay there, purged row by row.
      await pgQuery(client, 'ROLLBACK TO SAVEPOINT oncemq_partition', [], 'creating a partition');
    }
  }
}

/**
 * The keys of the rows of partition `part` that outlive a drop at cut-off `$1`: claims in progress and
 * rows updated since. Both arms name the status, so each reads the `(status, updated_at)` index for
 * the live rows alone: with `updated_at >= $1` bare, the planner reads that whole index (every row of
 * the day) while the ledger is locked exclusively.
 */
export function liveRowsSelect(part: string): string {
  return `SELECT consumer_group, msg_key, created_at FROM ${part}
    WHERE status = 'PROCESSING' OR (status IN ('SUCCESS', 'FAIL') AND updated_at >= $1)`;
}

/**
 * Drops the day partitions whose whole day lies before `olderThan`. In one short transaction per
 * partition, under an exclusive lock of the ledger table (held for milliseconds), rows of that day
 * still live (PROCESSING, or updated since the cut-off) are moved to the current day's partition and
 * the partition is dropped. Answers the rows dropped (counted just before) and the non-empty partitions dropped.
 */
export async function dropExpiredPartitions(
  q: PgClientLike,
  inTransaction: <T>(fn: (client: PgClientLike) => Promise<T>) => Promise<T>,
  schema: string,
  table: string,
  olderThan: Date,
  nowMs: number,
): Promise<{ deleted: number; partitions: number }> {
  const t = `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
  const prefix = `${table}_p`;
  const names = (
    await pgQuery<{ name: string }>(
      q,
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = $1::regclass ORDER BY 1`,
      [t],
      'listing partitions',
    )
  ).map((row) => row.name);
  let deleted = 0;
  let partitions = 0;
  for (const name of names) {
    const stamp = name.startsWith(prefix) ? name.slice(prefix.length) : '';
    if (!/^\d{8}$/.test(stamp)) continue;
    const dayEnd =
      Date.parse(`${stamp.slice(0, 4)}-${stamp.slice(4, 6)}-${stamp.slice(6, 8)}T00:00:00Z`) + DAY_MS;
    if (dayEnd > olderThan.getTime()) continue;
    const part = `${quoteIdentifier(schema)}.${quoteIdentifier(name)}`;
    const [counted] = await pgQuery<{ n: string }>(
      q,
      `SELECT COUNT(*) AS n FROM ${part}`,
      [],
      'counting a partition',
    );
    const moved = await inTransaction(async (client) => {
      await pgQuery(
        client,
        `LOCK TABLE ${t} IN ACCESS EXCLUSIVE MODE`,
        [],
        'locking the ledger for a partition drop',
      );
      const live = await pgExecute(
        client,
        `UPDATE ${t} SET created_at = $2 WHERE (consumer_group, msg_key, created_at) IN (${liveRowsSelect(part)})`,
        [olderThan, new Date(nowMs)],
        'moving live rows out of an expiring partition',
      );
      await pgQuery(client, `DROP TABLE ${part}`, [], 'dropping a partition');
      return live;
    });
    const rows = Math.max(0, Number(counted?.n ?? 0) - moved);
    deleted += rows;
    if (rows > 0) partitions++;
  }
  return { deleted, partitions };
}
