/**
 * Redis in front of a SQL ledger: the SQL ledger stays the truth (docs/ledgers/tiered.md).
 *
 * @module oncemq/tiered
 */
export { DEFAULT_TIERED_LEDGER_CONFIG, TieredLedger } from './ledger/tiered/tiered-ledger.js';
export type { TieredCacheMetrics, TieredLedgerConfig } from './ledger/tiered/tiered-ledger.js';
