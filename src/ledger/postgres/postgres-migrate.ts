import { ConfigError } from '../../core/errors.js';
import { pgQuery, type PgClientLike } from './postgres-client.js';
import { pgMigrations } from './postgres-ledger-sql.js';
import { ensurePartitions } from './postgres-partitions.js';
import { quoteIdentifier } from '../sql-identifier.js';

/**
 * Brings the ledger table to the latest schema version inside the caller's transaction on `client`.
 * Transaction-scoped advisory locks on the schema and on the table serialize concurrent starters,
 * so `CREATE … IF NOT EXISTS` never races; applied versions are recorded in `<table>_schema`. Answers the version reached.
 */
export async function pgMigrate(
  client: PgClientLike,
  schema: string,
  table: string,
  partitioned: { readonly nowMs: number } | undefined,
): Promise<number> {
  const versions = `${quoteIdentifier(schema)}.${quoteIdentifier(`${table}_schema`)}`;
  const steps = pgMigrations(schema, table, partitioned !== undefined);
  // The schema's lock first, then the table's, always in this order: `CREATE SCHEMA IF NOT EXISTS`
  // is not safe against itself (two starters both find no schema and one fails on pg_namespace's
  // unique index), and starters of different tables in one schema do not share the table's lock.
  await pgQuery(
    client,
    'SELECT pg_advisory_xact_lock(hashtextextended($1, 0)), pg_advisory_xact_lock(hashtextextended($2, 0))',
    [`oncemq:migrate-schema:${schema}`, `oncemq:migrate:${schema}.${table}`],
    'locking migrations',
  );
  await pgQuery(client, `CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(schema)}`, [], 'creating the schema');
  await pgQuery(
    client,
    `CREATE TABLE IF NOT EXISTS ${versions} (version integer PRIMARY KEY, applied_at timestamptz NOT NULL)`,
    [],
    'creating the version table',
  );
  const [row] = await pgQuery<{ version: number | null }>(
    client,
    `SELECT MAX(version) AS version FROM ${versions}`,
    [],
    'reading the schema version',
  );
  for (let version = (row?.version ?? 0) + 1; version <= steps.length; version++) {
    await pgQuery(client, steps[version - 1] ?? '', [], `migrating to version ${version}`);
    await pgQuery(
      client,
      `INSERT INTO ${versions} (version, applied_at) VALUES ($1, now())`,
      [version],
      'recording the schema version',
    );
  }
  const [kind] = await pgQuery<{ relkind: string }>(
    client,
    `SELECT c.relkind::text AS relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
    [schema, table],
    'reading the table kind',
  );
  if ((kind?.relkind === 'p') !== (partitioned !== undefined)) {
    throw new ConfigError(
      'partitioned',
      `the ledger table ${schema}.${table} is ${kind?.relkind === 'p' ? '' : 'not '}partitioned; set partitioned accordingly or use another table`,
    );
  }
  if (partitioned !== undefined) await ensurePartitions(client, schema, table, partitioned.nowMs);
  return steps.length;
}

/**
 * The recorded schema version of the ledger table, or `undefined` when its schema, the table or its
 * version table is missing. Looks the tables up with `to_regclass` first, so it never fails (and
 * never aborts the caller's transaction) on a missing one.
 */
export async function pgSchemaVersion(
  client: PgClientLike,
  schema: string,
  table: string,
): Promise<number | undefined> {
  const name = (t: string): string => `${quoteIdentifier(schema)}.${quoteIdentifier(t)}`;
  const [found] = await pgQuery<{ ledger: string | null; versions: string | null }>(
    client,
    'SELECT to_regclass($1)::text AS ledger, to_regclass($2)::text AS versions',
    [name(table), name(`${table}_schema`)],
    'looking up the ledger table',
  );
  if (found?.ledger == null || found.versions == null) return undefined;
  const [row] = await pgQuery<{ version: number | null }>(
    client,
    `SELECT MAX(version) AS version FROM ${name(`${table}_schema`)}`,
    [],
    'reading the schema version',
  );
  return row?.version ?? 0;
}
