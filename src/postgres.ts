export {
  DEFAULT_POSTGRES_LEDGER_CONFIG,
  MAX_POSTGRES_KEY_BYTES,
  MAX_POSTGRES_REMARK_LENGTH,
  MAX_POSTGRES_TABLE_LENGTH,
  PostgresLedger,
} from './ledger/postgres/postgres-ledger.js';
export type { PostgresLedgerConfig } from './ledger/postgres/postgres-ledger.js';
export type {
  PgClientLike,
  PgPoolClientLike,
  PgPoolLike,
  PgQueryResultLike,
} from './ledger/postgres/postgres-client.js';
