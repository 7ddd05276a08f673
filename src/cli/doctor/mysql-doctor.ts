import { parseDuration } from '../../core/duration.js';
import { DEFAULT_MYSQL_LEDGER_CONFIG } from '../../ledger/mysql/mysql-ledger.js';
import { mysqlMigrations } from '../../ledger/mysql/mysql-schema.js';
import { sqlIdentifier } from '../../ledger/sql-identifier.js';
import { loadDriver } from '../stores.js';
import { missingTableFinding, parseLedgerDdl, schemaFinding, type TableShape } from './expected-schema.js';
import type { Finding } from './findings.js';
import {
  diskOf,
  EXACT_COUNT_BYTES,
  GROWTH_WINDOWS,
  idleTimeoutFinding,
  skipped,
  urlHost,
} from './ledger-checks.js';
import type { LedgerInspector } from './ledger-doctor.js';

/** The part of a mysql2/promise connection the inspector uses. */
interface MysqlReader {
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>;
  end(): Promise<void>;
}

export interface MysqlDoctorTarget {
  readonly url: string;
  /** The ledger's database (default: the URL's). */
  readonly database?: string | undefined;
  readonly table?: string | undefined;
}

const num = (value: unknown): number => Number(value ?? 0);

/** A MySQL type as compared: lower case, without the display width of integers (`int(10) unsigned`). */
export function mysqlType(type: string): string {
  return type
    .toLowerCase()
    .replace(/\b(tinyint|smallint|mediumint|int|bigint)\(\d+\)/g, '$1')
    .trim();
}

/** MariaDB's `idle_transaction_timeout` of the doctor's session (the server's or the user's default). */
export function mariadbIdleFinding(seconds: number): Finding {
  return idleTimeoutFinding(
    'mysql.idle-timeout',
    'idle_transaction_timeout',
    `${seconds}s`,
    seconds > 0,
    "SET GLOBAL idle_transaction_timeout = 60 (longer than any handler's own pause inside its transaction), or set it per session for the consumers' user",
  );
}

/** Opens a read-only session on the MySQL/MariaDB ledger's server and answers its inspector. */
export async function openMysqlInspector(target: MysqlDoctorTarget): Promise<LedgerInspector> {
  const table = sqlIdentifier(target.table ?? DEFAULT_MYSQL_LEDGER_CONFIG.table, 'table');
  const mysql = await loadDriver(() => import('mysql2/promise'), 'mysql2');
  const conn = (await mysql.createConnection({ uri: target.url })) as unknown as MysqlReader;
  const all = async <R>(sql: string, values: unknown[] = []): Promise<R[]> =>
    (await conn.query(sql, values))[0] as R[];
  let server: { version: string; db: string | null } | undefined;
  try {
    await conn.query('SET SESSION TRANSACTION READ ONLY');
    [server] = await all<{ version: string; db: string | null }>(
      'SELECT VERSION() AS version, DATABASE() AS db',
    );
  } catch (error) {
    await conn.end();
    throw error;
  }
  const database = sqlIdentifier(target.database ?? server?.db ?? '', 'database');
  const mariadb = /mariadb/i.test(server?.version ?? '');
  const qualified = `\`${database}\`.\`${table}\``;
  const migrate = `oncemq migrate --store mysql --database ${database} --table ${table}`;
  const host = urlHost(target.url);

  const actualShape = async (): Promise<TableShape> => {
    const columns = await all<{ name: string; type: string; nullable: string }>(
      `SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, IS_NULLABLE AS nullable FROM information_schema.COLUMNS
       WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
      [database, table],
    );
    const keys = await all<{ name: string; non_unique: unknown; column: string }>(
      `SELECT INDEX_NAME AS name, NON_UNIQUE AS non_unique, COLUMN_NAME AS \`column\` FROM information_schema.STATISTICS
       WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
      [database, table],
    );
    const indexes = new Map<string, { unique: boolean; columns: string[] }>();
    for (const key of keys) {
      const index = indexes.get(key.name) ?? { unique: num(key.non_unique) === 0, columns: [] };
      index.columns.push(key.column);
      indexes.set(key.name, index);
    }
    return {
      columns: columns.map((row) => ({
        name: row.name,
        type: mysqlType(row.type),
        notNull: row.nullable === 'NO',
      })),
      indexes: [...indexes.values()],
    };
  };

  return {
    store: 'mysql',
    location: `${database}.${table}`,
    defaultRetentionMs: parseDuration(DEFAULT_MYSQL_LEDGER_CONFIG.retention, 'retention'),
    stuckCommand: `oncemq ledger stuck --store mysql --database ${database} --table ${table}`,
    async schema() {
      const [found] = await all<{ db: unknown; tables: unknown }>(
        `SELECT (SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?) AS db,
           (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?) AS tables`,
        [database, database, table],
      );
      if (num(found?.db) === 0) {
        return { present: false, finding: missingTableFinding(`the database ${database}`, migrate) };
      }
      if (num(found?.tables) === 0) {
        return { present: false, finding: missingTableFinding(`the ledger table ${qualified}`, migrate) };
      }
      const expected = parseLedgerDdl(mysqlMigrations(qualified)[0]?.[0] ?? '');
      const finding = schemaFinding(
        qualified,
        expected,
        await actualShape(),
        { normalize: mysqlType },
        `compare with a table made by \`${migrate}\` in a scratch database, and restore what differs (a missing key: ALTER TABLE ${qualified} ADD PRIMARY KEY (consumer_group, msg_key))`,
      );
      return { present: true, finding };
    },
    serverNowMs: async () => {
      const [row] = await all<{ ms: unknown }>('SELECT UNIX_TIMESTAMP(NOW(6)) * 1000 AS ms');
      return num(row?.ms);
    },
    async size(nowMs) {
      // As on PostgreSQL: InnoDB's row estimate past EXACT_COUNT_BYTES, the growth on the
      // (status, updated_at) index.
      const [counts] = await all<{ day: unknown; hour: unknown }>(
        `SELECT (SELECT COUNT(*) FROM ${qualified} WHERE status IN ('PROCESSING', 'SUCCESS', 'FAIL') AND updated_at > ?) AS day,
           (SELECT COUNT(*) FROM ${qualified} WHERE status IN ('PROCESSING', 'SUCCESS', 'FAIL') AND updated_at > ?) AS hour`,
        [nowMs - GROWTH_WINDOWS.dayMs, nowMs - GROWTH_WINDOWS.hourMs],
      );
      const [bytes] = await all<{ bytes: unknown; estimate: unknown }>(
        `SELECT DATA_LENGTH + INDEX_LENGTH AS bytes, TABLE_ROWS AS estimate FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
        [database, table],
      );
      const estimated = num(bytes?.bytes) > EXACT_COUNT_BYTES;
      const rowCount = estimated
        ? num(bytes?.estimate)
        : num((await all<{ n: unknown }>(`SELECT COUNT(*) AS n FROM ${qualified}`))[0]?.n);
      const [dir] = await all<{ dir: string | null }>('SELECT @@datadir AS dir');
      return {
        rows: rowCount,
        ...(estimated ? { rowsEstimated: true } : {}),
        bytes: num(bytes?.bytes),
        rowsLastDay: num(counts?.day),
        rowsLastHour: num(counts?.hour),
        disk: await diskOf(host, dir?.dir ?? undefined),
      };
    },
    async stuck(nowMs, group) {
      const [row] = await all<{ n: unknown }>(
        `SELECT COUNT(*) AS n FROM ${qualified} WHERE status = 'PROCESSING' AND lease_until < ?
         AND (? IS NULL OR consumer_group = ?)`,
        [nowMs, group ?? null, group ?? null],
      );
      return num(row?.n);
    },
    async settings() {
      if (!mariadb) {
        return [
          skipped(
            'mysql.idle-timeout',
            'MySQL has no idle-transaction timeout (MariaDB has idle_transaction_timeout): a cut-off host’s claims hold their row locks until wait_timeout or TCP keepalive ends its session',
          ),
        ];
      }
      const [row] = await all<{ value: unknown }>('SELECT @@SESSION.idle_transaction_timeout AS value');
      return [mariadbIdleFinding(num(row?.value))];
    },
    close: () => conn.end(),
  };
}
