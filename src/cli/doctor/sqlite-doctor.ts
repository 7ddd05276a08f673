import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseDuration } from '../../core/duration.js';
import { DEFAULT_SQL_LEDGER_CONFIG } from '../../ledger/sql-ledger-config.js';
import { quoteIdentifier, sqlIdentifier } from '../../ledger/sql-identifier.js';
import { migrations } from '../../ledger/sqlite/sqlite-ledger-sql.js';
import { loadDriver } from '../stores.js';
import { missingTableFinding, parseLedgerDdl, schemaFinding, type TableShape } from './expected-schema.js';
import { diskOf, GROWTH_WINDOWS } from './ledger-checks.js';
import type { LedgerInspector } from './ledger-doctor.js';

/** The part of a better-sqlite3 database the inspector uses. */
interface SqliteReader {
  prepare(sql: string): { get(...values: unknown[]): unknown; all(...values: unknown[]): unknown[] };
  close(): void;
}

type ReaderConstructor = new (
  path: string,
  options: { readonly: boolean; fileMustExist: boolean },
) => SqliteReader;

export interface SqliteDoctorTarget {
  /** The database file. */
  readonly path: string;
  readonly table?: string | undefined;
}

const num = (value: unknown): number => Number(value ?? 0);

/** Opens the SQLite ledger file read-only (never creating it) and answers its inspector. */
export async function openSqliteInspector(target: SqliteDoctorTarget): Promise<LedgerInspector> {
  const table = sqlIdentifier(target.table ?? DEFAULT_SQL_LEDGER_CONFIG.table, 'table');
  const path = resolve(target.path);
  const migrate = `oncemq migrate --store sqlite --url ${target.path} --table ${table}`;
  let db: SqliteReader | undefined;
  if (existsSync(path)) {
    const module = await loadDriver(() => import('better-sqlite3'), 'better-sqlite3');
    const Database = (module as unknown as { default: ReaderConstructor }).default;
    db = new Database(path, { readonly: true, fileMustExist: true });
  }
  const t = quoteIdentifier(table);
  const open = (): SqliteReader => {
    if (db === undefined) throw new Error(`the SQLite file ${path} does not exist`);
    return db;
  };

  const actualShape = (reader: SqliteReader): TableShape => {
    const columns = reader
      .prepare(`SELECT name, type, "notnull" AS nn, pk FROM pragma_table_info(?)`)
      .all(table) as {
      name: string;
      type: string;
      nn: number;
      pk: number;
    }[];
    const list = reader.prepare('SELECT name, "unique" AS u FROM pragma_index_list(?)').all(table) as {
      name: string;
      u: number;
    }[];
    const indexes = list.map((index) => ({
      unique: index.u === 1,
      columns: (
        reader.prepare('SELECT name FROM pragma_index_info(?) ORDER BY seqno').all(index.name) as {
          name: string;
        }[]
      ).map((column) => column.name),
    }));
    // A primary key of the table's rowid has no index of its own.
    const pk = columns.filter((column) => column.pk > 0).sort((a, b) => a.pk - b.pk);
    if (pk.length === 1 && pk[0]?.type.toUpperCase() === 'INTEGER')
      indexes.push({ unique: true, columns: [pk[0].name] });
    return {
      columns: columns.map((column) => ({
        name: column.name,
        type: column.type.toUpperCase(),
        notNull: column.nn === 1,
      })),
      indexes,
    };
  };

  return {
    store: 'sqlite',
    location: path,
    defaultRetentionMs: parseDuration(DEFAULT_SQL_LEDGER_CONFIG.retention, 'retention'),
    stuckCommand: `oncemq ledger stuck --store sqlite --url ${target.path} --table ${table}`,
    schema() {
      if (db === undefined) {
        return Promise.resolve({
          present: false,
          finding: missingTableFinding(`the SQLite file ${path}`, migrate),
        });
      }
      const found = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table);
      if (found === undefined) {
        return Promise.resolve({
          present: false,
          finding: missingTableFinding(`the ledger table "${table}" in ${path}`, migrate),
        });
      }
      const finding = schemaFinding(
        `"${table}"`,
        parseLedgerDdl(migrations(table)[0] ?? ''),
        actualShape(db),
        { normalize: (type) => type.toUpperCase() },
        `compare with a table made by \`${migrate}\` in a scratch file, and restore what differs (SQLite cannot add a primary key to a table: copy the rows into a new one)`,
      );
      return Promise.resolve({ present: true, finding });
    },
    serverNowMs: 'the SQLite file is read by this process, on its own clock',
    size(nowMs) {
      const reader = open();
      const counts = reader
        .prepare(
          `SELECT COUNT(*) AS n, COALESCE(SUM(created_at > ?), 0) AS day, COALESCE(SUM(created_at > ?), 0) AS hour FROM ${t}`,
        )
        .get(nowMs - GROWTH_WINDOWS.dayMs, nowMs - GROWTH_WINDOWS.hourMs) as {
        n: number;
        day: number;
        hour: number;
      };
      let bytes: number;
      try {
        const row = reader
          .prepare(
            'SELECT SUM(pgsize) AS bytes FROM dbstat WHERE name = ? OR name IN (SELECT name FROM pragma_index_list(?))',
          )
          .get(table, table) as { bytes: number | null };
        bytes = num(row.bytes);
      } catch {
        // Without the dbstat table (a build without it): the whole file.
        const row = reader
          .prepare('SELECT page_count * page_size AS bytes FROM pragma_page_count(), pragma_page_size()')
          .get() as {
          bytes: number;
        };
        bytes = num(row.bytes);
      }
      return diskOf(undefined, dirname(path)).then((disk) => ({
        rows: num(counts.n),
        bytes,
        rowsLastDay: num(counts.day),
        rowsLastHour: num(counts.hour),
        disk,
      }));
    },
    stuck(nowMs, group) {
      const row = open()
        .prepare(
          `SELECT COUNT(*) AS n FROM ${t} WHERE status = 'PROCESSING' AND lease_until < ? AND (? IS NULL OR consumer_group = ?)`,
        )
        .get(nowMs, group ?? null, group ?? null) as { n: number };
      return Promise.resolve(num(row.n));
    },
    settings: () => Promise.resolve([]),
    close() {
      db?.close();
      return Promise.resolve();
    },
  };
}
