export { DEFAULT_TIERED_LEDGER_CONFIG, TieredLedger } from './ledger/tiered/tiered-ledger.js';
export type { TieredCacheMetrics, TieredLedgerConfig } from './ledger/tiered/tiered-ledger.js';
