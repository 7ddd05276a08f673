/**
 * Conformance suites: vitest test suites that every ledger and transport runs. They need vitest;
 * the fault injector and the effect checker (oncemq/testing) do not.
 *
 * @module oncemq/conformance
 */
export { describeLedgerConformance } from './testing/ledger-conformance.js';
export type {
  LedgerConformanceFactory,
  LedgerInstanceOptions,
  LedgerNamespace,
} from './testing/ledger-conformance-fixture.js';
export { describeTransportConformance } from './testing/transport-conformance.js';
export type {
  ForeignHeaderType,
  ForeignHeaderValue,
  ForeignMessage,
  ForeignProducer,
  PartitionCounts,
  TransportFactory,
  TransportUnderTest,
} from './testing/transport-conformance.js';
