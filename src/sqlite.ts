export { DEFAULT_SQLITE_LEDGER_CONFIG, MAX_REMARK_LENGTH, SqliteLedger } from './ledger/sqlite-ledger.js';
export type { SqliteDatabaseLike, SqliteLedgerConfig, SqliteStatementLike } from './ledger/sqlite-ledger.js';
