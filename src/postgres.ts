/**
 * The PostgreSQL ledger, through pg 8 (docs/ledgers/postgres.md).
 *
 * @module oncemq/postgres
 */
export {
  DEFAULT_POSTGRES_LEDGER_CONFIG,
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
export { postgresDialect } from './ledger/postgres/postgres-dialect.js';
