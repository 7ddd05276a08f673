export { describeLedgerConformance } from './testing/ledger-conformance.js';
export { conformanceRequest, gate, withNamespace, wonClaim } from './testing/ledger-conformance-fixture.js';
export type {
  LedgerConformanceFactory,
  LedgerInstanceOptions,
  LedgerNamespace,
} from './testing/ledger-conformance-fixture.js';
export { HOSTILE_STRINGS, HOSTILE_TABLE_NAMES } from './testing/ledger-conformance-hostile.js';
export { EffectChecker } from './testing/effect-checker.js';
export type { EffectReport, Expectation } from './testing/effect-checker.js';
export {
  DEFAULT_FAULT_RATES,
  FAULT_NAMES,
  FaultInjector,
  InjectedFault,
  parseFaults,
} from './testing/fault-injector.js';
export type { FaultInjectorConfig, FaultName } from './testing/fault-injector.js';
export { describeTransportConformance } from './testing/transport-conformance.js';
export type { TransportFactory } from './testing/transport-conformance.js';
