// Tools to prove exactly-once effect around any handler: a seeded fault injector, a ledger whose
// commits fail on demand, and an effect checker.
// The vitest conformance suites for ledgers and transports are in oncemq/conformance.
export { injectCommitFailures } from './testing/commit-failure.js';
export type { CommitFaultHooks } from './testing/commit-failure.js';
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
export { ConnectProxy } from './testing/connect-proxy.js';
export { TcpProxy } from './testing/tcp-proxy.js';
export type { TcpProxyConfig } from './testing/tcp-proxy.js';
export { checkRollback, RollbackCheckError } from './testing/rollback-check.js';
export type { RollbackCheckFailure, RollbackCheckOptions, RollbackReport } from './testing/rollback-check.js';
