export { describeLedgerConformance } from './testing/ledger-conformance.js';
export { conformanceRequest, gate, withNamespace, wonClaim } from './testing/ledger-conformance-fixture.js';
export type {
  LedgerConformanceFactory,
  LedgerInstanceOptions,
  LedgerNamespace,
} from './testing/ledger-conformance-fixture.js';
export { HOSTILE_STRINGS, HOSTILE_TABLE_NAMES } from './testing/ledger-conformance-hostile.js';
