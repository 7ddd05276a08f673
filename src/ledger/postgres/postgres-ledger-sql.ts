import { createHash } from 'node:crypto';
import { ownedWriteSql, type OwnedWrite } from '../sql-leases.js';
import type { PgStatement } from './postgres-client.js';
import { partitionedMigration, partitionedStatements } from './postgres-partitions.js';
import { quoteIdentifier } from '../sql-identifier.js';

const COLUMNS = `consumer_group text NOT NULL,
      msg_key text NOT NULL,
      status text NOT NULL CHECK (status IN ('PROCESSING', 'SUCCESS', 'FAIL')),
      fingerprint text,
      owner text,
      attempt integer NOT NULL DEFAULT 1,
      lease_until timestamptz,
      broker_id text,
      topic text,
      remark text,
      result text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL`;

/**
 * Versioned migrations of the ledger table; step n brings the schema to version n. Index names
 * derive from the table name (at most 63 bytes in PostgreSQL, hence the shorter table limit).
 */
export function pgMigrations(schema: string, table: string, partitioned = false): readonly string[] {
  const t = `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
  if (partitioned) return [partitionedMigration(schema, table, COLUMNS)];
  return [
    `CREATE TABLE ${t} (
      ${COLUMNS},
      PRIMARY KEY (consumer_group, msg_key)
    );
    CREATE INDEX ${quoteIdentifier(`${table}_status_updated`)} ON ${t} (status, updated_at);
    CREATE INDEX ${quoteIdentifier(`${table}_stuck`)} ON ${t} (lease_until) WHERE status = 'PROCESSING';`,
  ];
}

/**
 * The statements of one ledger table, built once from validated, quoted identifiers. With `prepared`,
 * each is named after a digest of its text so pg prepares it once per connection.
 */
export function pgStatements(schema: string, table: string, prepared = true, partitioned = false) {
  const t = `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
  const named = (text: string): PgStatement =>
    prepared
      ? { name: `oncemq_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`, text }
      : text;
  const owned = ownedWriteSql(t, (n) => `$${n}`);
  const base = {
    table: t,
    versions: `${quoteIdentifier(schema)}.${quoteIdentifier(`${table}_schema`)}`,
    /**
     * Inserts the claim unless the key has a row (`rowCount` 1: acquired). A claim that finds a row
     * reads it with `select`, a statement of its own: a first claim, by far the most common, gets
     * back no row (nothing for the driver to describe and parse), and a row committed by a
     * transaction the insert waited for, invisible to the insert's snapshot, is in the next one.
     */
    claim:
      named(`INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
      VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $9, $9)
      ON CONFLICT (consumer_group, msg_key) DO NOTHING`),
    select: named(`SELECT * FROM ${t} WHERE consumer_group = $1 AND msg_key = $2`),
    reclaim:
      named(`UPDATE ${t} SET status = $3, owner = $4, attempt = attempt + 1, lease_until = $5, broker_id = $6, topic = $7,
        fingerprint = COALESCE(fingerprint, $8), remark = NULL, updated_at = $9
      WHERE consumer_group = $1 AND msg_key = $2 AND status = $10 AND attempt = $11 AND owner IS NOT DISTINCT FROM $12`),
    storeResult: named(`UPDATE ${t} SET result = $3 WHERE consumer_group = $1 AND msg_key = $2`),
    /** The owner-checked writes; bind their values, then group, key, owner and attempt. */
    owned: Object.fromEntries(Object.entries(owned).map(([name, text]) => [name, named(text)])) as Record<
      OwnedWrite,
      PgStatement
    >,
    recordFailure:
      named(`INSERT INTO ${t} AS l (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, remark, created_at, updated_at)
      VALUES ($1, $2, 'FAIL', $3, NULL, 1, NULL, $4, $5, $6, $7, $7)
      ON CONFLICT (consumer_group, msg_key) DO UPDATE SET
        attempt = l.attempt + 1, remark = excluded.remark, updated_at = excluded.updated_at
      WHERE l.status = 'FAIL'`),
    /** Bounded delete of finished rows, on the (status, updated_at) index; skips rows a claim holds. */
    purge: named(`DELETE FROM ${t} WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM ${t} WHERE status IN ('SUCCESS', 'FAIL') AND updated_at < $1
        LIMIT $2 FOR UPDATE SKIP LOCKED))`),
    reset: named(
      `DELETE FROM ${t} WHERE consumer_group = $1 AND msg_key = $2 AND (status <> 'SUCCESS' OR $3::boolean)`,
    ),
    /**
     * Multi-row claim of a batch: arrays in (and the batch's one owner token), the won keys out. Rows
     * go in in the given (sorted) order.
     */
    claimMany:
      named(`INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
      SELECT g, k, 'SUCCESS', f, $4::text, 1, NULL, b, tp, $7, $7
      FROM unnest($1::text[], $2::text[], $3::text[], $5::text[], $6::text[]) WITH ORDINALITY AS i(g, k, f, b, tp, n)
      ORDER BY n
      ON CONFLICT (consumer_group, msg_key) DO NOTHING
      RETURNING consumer_group, msg_key`),
    selectMany: named(
      `SELECT l.* FROM ${t} l JOIN unnest($1::text[], $2::text[]) AS i(g, k) ON l.consumer_group = i.g AND l.msg_key = i.k`,
    ),
    storeResults:
      named(`UPDATE ${t} l SET result = i.r FROM unnest($1::text[], $2::text[], $3::text[]) AS i(g, k, r)
      WHERE l.consumer_group = i.g AND l.msg_key = i.k`),
  };
  if (!partitioned) return { ...base, lock: named(''), lockMany: named('') };
  const p = partitionedStatements(t);
  return {
    ...base,
    claim: named(p.claim),
    recordFailure: named(p.recordFailure),
    purge: named(p.purge),
    claimMany: named(p.claimMany),
    lock: named(p.lock),
    lockMany: named(p.lockMany),
  };
}

export type PgStatements = ReturnType<typeof pgStatements>;
