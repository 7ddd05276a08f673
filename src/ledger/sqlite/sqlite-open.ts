import { ConfigError } from '../../core/errors.js';
import { checkSchemaVersion } from '../schema-version.js';
import { quoteIdentifier } from '../sql-identifier.js';
import type { SqliteDatabaseLike } from './sqlite-database.js';
import { migrations } from './sqlite-ledger-sql.js';

/** How a SqliteLedger opens the file it was given by path. */
export interface SqliteFileOptions {
  readonly busyTimeoutMs: number;
  readonly synchronous: 'full' | 'normal';
  /** Refuse a file that does not exist instead of creating it (a ledger that does not migrate). */
  readonly mustExist: boolean;
  /** The command that creates the ledger, for the message when the file is missing. */
  readonly fix: string;
}

type DatabaseConstructor = new (path: string, options?: { fileMustExist?: boolean }) => SqliteDatabaseLike;

/** Opens a database file with better-sqlite3: the busy timeout, WAL, and the `synchronous` pragma. */
export async function openSqliteFile(path: string, options: SqliteFileOptions): Promise<SqliteDatabaseLike> {
  let Database: DatabaseConstructor;
  try {
    Database = ((await import('better-sqlite3')) as unknown as { default: DatabaseConstructor }).default;
  } catch (error) {
    throw new ConfigError(
      'database',
      'opening a SQLite file needs the better-sqlite3 package (npm install better-sqlite3@12)',
      { cause: error },
    );
  }
  let db: SqliteDatabaseLike;
  try {
    db = new Database(path, { fileMustExist: options.mustExist });
  } catch (error) {
    if (!options.mustExist) throw error;
    throw new ConfigError(
      'database',
      `the SQLite file ${path} does not exist, and this ledger does not migrate (migrate: false); create it with \`${options.fix}\``,
      { cause: error },
    );
  }
  db.exec(`PRAGMA busy_timeout = ${Math.round(options.busyTimeoutMs)}`);
  db.exec('PRAGMA journal_mode = WAL');
  db.exec(`PRAGMA synchronous = ${options.synchronous.toUpperCase()}`);
  return db;
}

/** The version table of a ledger table. */
function versions(table: string): string {
  return quoteIdentifier(`${table}_schema`);
}

/**
 * Brings the ledger table to the latest schema version in one `BEGIN IMMEDIATE` transaction (other
 * processes wait on the write lock); applied versions are recorded in `<table>_schema`.
 */
export function migrateSqlite(db: SqliteDatabaseLike, table: string, clock: () => number): void {
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${versions(table)} (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
    );
    const row = db.prepare(`SELECT MAX(version) AS version FROM ${versions(table)}`).get() as {
      version: number | null;
    };
    const steps = migrations(table);
    for (let version = (row.version ?? 0) + 1; version <= steps.length; version++) {
      db.exec(steps[version - 1] ?? '');
      db.prepare(`INSERT INTO ${versions(table)} (version, applied_at) VALUES (?, ?)`).run(version, clock());
    }
    db.exec('COMMIT');
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
}

/** Checks, without writing, that the ledger table and its version table exist at the latest version. */
export function checkSqliteSchema(db: SqliteDatabaseLike, table: string, fix: string): void {
  const exists = (name: string): boolean =>
    db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(name) !== undefined;
  let found: number | undefined;
  if (exists(table) && exists(`${table}_schema`)) {
    const row = db.prepare(`SELECT MAX(version) AS version FROM ${versions(table)}`).get() as {
      version: number | null;
    };
    found = row.version ?? 0;
  }
  checkSchemaVersion(found, migrations(table).length, `"${table}"`, fix);
}
