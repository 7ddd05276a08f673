import { parseDuration } from '../../core/duration.js';
import { DEFAULT_POSTGRES_LEDGER_CONFIG } from '../../ledger/postgres/postgres-ledger.js';
import { pgMigrations } from '../../ledger/postgres/postgres-ledger-sql.js';
import { quoteIdentifier, sqlIdentifier } from '../../ledger/sql-identifier.js';
import { loadDriver } from '../stores.js';
import { missingTableFinding, parseLedgerDdl, schemaFinding, type TableShape } from './expected-schema.js';
import type { Finding } from './findings.js';
import { diskOf, EXACT_COUNT_BYTES, GROWTH_WINDOWS, idleTimeoutFinding, urlHost } from './ledger-checks.js';
import type { LedgerInspector } from './ledger-doctor.js';

/** The part of a pg `Client` the inspector uses. */
interface PgReader {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names its rows' shape, as pg's own typing does
  query<R>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
  end(): Promise<void>;
}

/** Where the PostgreSQL ledger is: the URL and the table's schema and name. */
export interface PostgresDoctorTarget {
  readonly url: string;
  readonly schema?: string | undefined;
  readonly table?: string | undefined;
}

const num = (value: unknown): number => Number(value ?? 0);

/**
 * `idle_in_transaction_session_timeout` of the doctor's own session, which a consumer of the same
 * user and database gets too (from `ALTER ROLE`, `ALTER DATABASE`, the server's configuration).
 */
export function pgIdleFinding(value: string): Finding {
  return idleTimeoutFinding(
    'postgres.idle-timeout',
    'idle_in_transaction_session_timeout',
    value,
    value !== '0' && value !== '',
    "ALTER ROLE <consumer> SET idle_in_transaction_session_timeout = '60s' (longer than any handler's own pause inside its transaction), or `?options=-c%20idle_in_transaction_session_timeout%3D60000` in the consumers' URL",
  );
}

/** Opens a read-only session on the PostgreSQL ledger's database and answers its inspector. */
export async function openPostgresInspector(target: PostgresDoctorTarget): Promise<LedgerInspector> {
  const schema = sqlIdentifier(target.schema ?? DEFAULT_POSTGRES_LEDGER_CONFIG.schema, 'schema');
  const table = sqlIdentifier(target.table ?? DEFAULT_POSTGRES_LEDGER_CONFIG.table, 'table');
  const pg = await loadDriver(() => import('pg'), 'pg');
  const client = new pg.default.Client({ connectionString: target.url }) as unknown as PgReader & {
    connect(): Promise<void>;
    on(event: 'error', listener: () => void): void;
  };
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('SET default_transaction_read_only = on');
  } catch (error) {
    await client.end();
    throw error;
  }
  const name = `${schema}.${table}`;
  const qualified = `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;
  const migrate = `oncemq migrate --store postgres --schema ${schema} --table ${table}`;
  const host = urlHost(target.url);

  const lookup = async (): Promise<{ oid: number; kind: string } | undefined> => {
    const { rows } = await client.query<{ oid: number; kind: string }>(
      `SELECT c.oid::int AS oid, c.relkind::text AS kind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
      [schema, table],
    );
    return rows[0];
  };

  const actualShape = async (oid: number): Promise<TableShape> => {
    const columns = await client.query<{ name: string; type: string; not_null: boolean }>(
      `SELECT attname AS name, format_type(atttypid, atttypmod) AS type, attnotnull AS not_null
       FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
      [oid],
    );
    const indexes = await client.query<{ unique: boolean; columns: string[] }>(
      `SELECT i.indisunique AS unique, ARRAY(
         SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n) AS columns
       FROM pg_index i WHERE i.indrelid = $1`,
      [oid],
    );
    return {
      columns: columns.rows.map((row) => ({ name: row.name, type: row.type, notNull: row.not_null })),
      indexes: indexes.rows.map((row) => ({ unique: row.unique, columns: row.columns })),
    };
  };

  return {
    store: 'postgres',
    location: name,
    defaultRetentionMs: parseDuration(DEFAULT_POSTGRES_LEDGER_CONFIG.retention, 'retention'),
    stuckCommand: `oncemq ledger stuck --store postgres --schema ${schema} --table ${table}`,
    async schema() {
      const found = await lookup();
      if (found === undefined) {
        const { rows } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
        const what =
          rows.length === 0
            ? `the schema ${schema} (and the ledger table ${name})`
            : `the ledger table ${name}`;
        return { present: false, finding: missingTableFinding(what, migrate) };
      }
      const ddl = pgMigrations(schema, table, found.kind === 'p')[0] ?? '';
      const expected = parseLedgerDdl(ddl);
      const types = new Map<string, string>();
      for (const column of expected.columns) {
        if (types.has(column.type)) continue;
        const { rows } = await client.query<{ type: string }>(
          'SELECT format_type(to_regtype($1), NULL) AS type',
          [column.type],
        );
        types.set(column.type, rows[0]?.type ?? column.type);
      }
      const finding = schemaFinding(
        found.kind === 'p' ? `${name} (partitioned daily)` : name,
        expected,
        await actualShape(found.oid),
        { normalize: (type) => types.get(type) ?? type },
        `compare with a table made by \`${migrate} \` on a scratch schema, and restore what differs (a missing key: CREATE UNIQUE INDEX … ON ${name} (consumer_group, msg_key))`,
      );
      return { present: true, finding };
    },
    serverNowMs: async () => {
      const { rows } = await client.query<{ ms: string }>(
        'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms',
      );
      return num(rows[0]?.ms);
    },
    async size(nowMs) {
      // The row count is the planner's estimate once the table is past EXACT_COUNT_BYTES (a count(*)
      // reads the whole table: minutes at tens of millions of rows); the growth is counted on the
      // (status, updated_at) index, so it reads a day's rows, not the table.
      const { rows } = await client.query<{
        estimate: string;
        analyzed: boolean;
        bytes: string;
        day: string;
        hour: string;
      }>(
        `WITH leaves AS (SELECT c.reltuples FROM pg_partition_tree($3::regclass) t JOIN pg_class c ON c.oid = t.relid WHERE t.isleaf)
         SELECT (SELECT coalesce(sum(reltuples) FILTER (WHERE reltuples >= 0), 0) FROM leaves) AS estimate,
           (SELECT coalesce(bool_or(reltuples >= 0), false) FROM leaves) AS analyzed,
           (SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree($3::regclass)) AS bytes,
           (SELECT count(*) FROM ${qualified} WHERE status IN ('PROCESSING', 'SUCCESS', 'FAIL') AND updated_at > $1) AS day,
           (SELECT count(*) FROM ${qualified} WHERE status IN ('PROCESSING', 'SUCCESS', 'FAIL') AND updated_at > $2) AS hour`,
        [new Date(nowMs - GROWTH_WINDOWS.dayMs), new Date(nowMs - GROWTH_WINDOWS.hourMs), qualified],
      );
      const row = rows[0];
      const estimated = row?.analyzed === true && num(row.bytes) > EXACT_COUNT_BYTES;
      const count = estimated
        ? num(row.estimate)
        : num((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${qualified}`)).rows[0]?.n);
      let dir: string | undefined;
      try {
        dir = (await client.query<{ dir: string }>("SELECT current_setting('data_directory') AS dir")).rows[0]
          ?.dir;
      } catch {
        dir = undefined;
      }
      return {
        rows: count,
        ...(estimated ? { rowsEstimated: true } : {}),
        bytes: num(row?.bytes),
        rowsLastDay: num(row?.day),
        rowsLastHour: num(row?.hour),
        disk:
          dir === undefined
            ? { unknown: 'reading data_directory needs the pg_read_all_settings role' }
            : await diskOf(host, dir),
      };
    },
    async stuck(nowMs, group) {
      const { rows } = await client.query<{ n: string }>(
        `SELECT count(*) AS n FROM ${qualified} WHERE status = 'PROCESSING' AND lease_until < $1
         AND ($2::text IS NULL OR consumer_group = $2)`,
        [new Date(nowMs), group ?? null],
      );
      return num(rows[0]?.n);
    },
    async settings() {
      const { rows } = await client.query<{ value: string }>(
        "SELECT current_setting('idle_in_transaction_session_timeout') AS value",
      );
      return [pgIdleFinding(rows[0]?.value ?? '0')];
    },
    close: () => client.end(),
  };
}
