/**
 * The SQLite ledger, through better-sqlite3 12 (docs/ledgers/sqlite.md).
 *
 * @module oncemq/sqlite
 */
export { DEFAULT_SQLITE_LEDGER_CONFIG, SqliteLedger } from './ledger/sqlite/sqlite-ledger.js';
export type { SqliteLedgerConfig } from './ledger/sqlite/sqlite-ledger.js';
export type {
  SqliteDatabaseLike,
  SqliteHandle,
  SqliteStatementLike,
} from './ledger/sqlite/sqlite-database.js';
export type { SqliteConnectionSource } from './ledger/sqlite/sqlite-connection-source.js';
export { sqliteDialect } from './ledger/sqlite/sqlite-dialect.js';
