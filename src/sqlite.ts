export { DEFAULT_SQLITE_LEDGER_CONFIG, SqliteLedger } from './ledger/sqlite/sqlite-ledger.js';
export { MAX_REMARK_LENGTH } from './ledger/ledger.js';
export type {
  SqliteDatabaseLike,
  SqliteLedgerConfig,
  SqliteStatementLike,
} from './ledger/sqlite/sqlite-ledger.js';
