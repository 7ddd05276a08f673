/**
 * The core: `createPipeline` and its configuration, outcomes, envelopes, errors, the retry policy,
 * the `Ledger` and `Transport` contracts (and what a custom ledger or transport builds on), the
 * transactional outbox and its relay, and OpenTelemetry. Ledgers and transports are in their own
 * entry points, so that only the drivers you use are loaded.
 *
 * @module oncemq
 */
export { createPipeline, DEFAULT_PIPELINE_CONFIG } from './consumer/pipeline.js';
export type {
  BatchContext,
  BatchEvent,
  BatchHandler,
  Decoder,
  Handler,
  Pipeline,
  PipelineConfig,
} from './consumer/pipeline.js';
export { downstreamKey } from './consumer/handler-context.js';
export type { HandlerContext, Mode } from './consumer/handler-context.js';
export type { PipelineMetrics } from './consumer/metrics.js';
export { DEFAULT_REPLAY_MARGIN, RetryPolicy } from './core/retry-policy.js';
export type { RetryDecision, RetryPolicyConfig } from './core/retry-policy.js';
export type { Duration } from './core/duration.js';
export {
  createEnvelope,
  DELIVERY_COUNT_HEADER,
  KEY_HEADER,
  MAX_DELIVERY_COUNT,
  ORDERING_KEY_HEADER,
  readDeliveryCount,
} from './core/envelope.js';
export type { DeliveryKeepAlive, Envelope, EnvelopeInit } from './core/envelope.js';
export {
  ClosedError,
  CommitRejectedError,
  ConfigError,
  ConflictError,
  LeaseLostError,
  LedgerUnavailableError,
  OncemqError,
  PermanentError,
  TransportClosedError,
} from './core/errors.js';
export type { OncemqErrorCode, PermanentReason } from './core/errors.js';
export type { FingerprintSource } from './core/fingerprint.js';
export { DEFAULT_KEY_SOURCE } from './core/key.js';
export type { KeySource } from './core/key.js';
export { SILENT_LOGGER } from './core/logger.js';
export type { Logger, PartialLogger } from './core/logger.js';
export { consoleLogger, DEFAULT_CONSOLE_LOGGER_CONFIG, DEFAULT_LOGGER } from './core/console-logger.js';
export type { ConsoleLoggerConfig, LogLevel } from './core/console-logger.js';
export type {
  BusyOutcome,
  OutcomeBase,
  ConflictOutcome,
  DeadLetterReason,
  DeadOutcome,
  DuplicateOutcome,
  DuplicateSource,
  ExecutedOutcome,
  Outcome,
  OutcomeAction,
  OutcomeKind,
  RetryAction,
  RetryOutcome,
} from './core/outcome.js';
export { MAX_RETRY_DELAY_MS } from './core/outcome.js';
export { JSON_SERIALIZER } from './core/serializer.js';
export type { Serializer } from './core/serializer.js';
export { DEFAULT_LEDGER_CAPABILITIES } from './ledger/ledger.js';
export type {
  BatchWork,
  ListQuery,
  MaintenanceLock,
  ResetOptions,
  Claim,
  ClaimRequest,
  ClaimResult,
  ClaimStatus,
  Ledger,
  LedgerCapabilities,
  LedgerRecord,
  LedgerStatus,
  PurgeOptions,
  PurgeResult,
  TransactionWork,
} from './ledger/ledger.js';
// For custom ledgers (docs/ledgers/custom.md): the runtime every backend runs under, and the shared claim decision.
export { decideExisting } from './ledger/claim-decision.js';
export type { ExistingRowDecision } from './ledger/claim-decision.js';
export { RuntimeLedger } from './ledger/runtime-ledger.js';
export type { RuntimeLedgerOptions } from './ledger/runtime-ledger.js';
export type {
  BatchClaim,
  LeasedClaims,
  LedgerBackend,
  LedgerInspection,
  LedgerTraits,
  MaintenanceLockTaker,
  Purge,
  TransactionalClaims,
} from './ledger/ledger-backend.js';
export { transition } from './ledger/transition.js';
export type { TransitionResult, TransitionSpec, TransitionValue } from './ledger/transition.js';
export type { SqlDialect, SqlValue } from './ledger/sql-dialect.js';
export type { SqlBridge } from './ledger/sql-bridge.js';
export { DEFAULT_RETENTION_CONFIG, startRetention } from './ledger/retention.js';
export type { Retention, RetentionConfig, RetentionProgress } from './ledger/retention.js';
export { TransportUnavailableError } from './core/errors.js';
export {
  DEFAULT_SUBSCRIBE_OPTIONS,
  DEFAULT_TRANSPORT_CAPABILITIES,
  UNIQUE_ID_HEADER,
} from './transport/transport.js';
export type {
  OutgoingMessage,
  Processor,
  ProcessorLike,
  PublishReceipt,
  StartPosition,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportCapabilities,
} from './transport/transport.js';
export {
  DEAD_LETTER_HEADERS,
  DeadLetterCutError,
  deadLetterHeaders,
  DeadLetterTooLargeError,
  DEFAULT_DEAD_LETTER_LIMIT,
  readDeadLetter,
  replayHeaders,
} from './transport/dead-letters.js';
export type {
  DeadLetter,
  DeadLetterCause,
  DeadLetterCut,
  DeadLetterQuery,
  DeadLetters,
} from './transport/dead-letters.js';
export { createOutbox } from './outbox/outbox.js';
export type { Outbox, OutboxEntry } from './outbox/outbox.js';
export { DEFAULT_OUTBOX_CONFIG, MAX_OUTBOX_TABLE_LENGTH } from './outbox/outbox-config.js';
export type { OutboxConfig } from './outbox/outbox-config.js';
export type { OutboxMessage } from './outbox/outbox-message.js';
export type { OutboxDatabase } from './outbox/outbox-database.js';
export { createRelay } from './outbox/relay.js';
export type { Relay, RelayMetrics, RelayRound } from './outbox/relay.js';
export { DEFAULT_RELAY_CONFIG, RelayCrash } from './outbox/relay-config.js';
export type { RelayConfig, RelayFaults } from './outbox/relay-config.js';
export { OUTBOX_ID_HEADER } from './outbox/relay-rows.js';
export type { RelayedMessage } from './outbox/relay-rows.js';
export { createTransactionalSender } from './outbox/transactional-send.js';
export type {
  TransactionalSender,
  HalfMessageProducer,
  HalfMessageTransport,
  TransactionalSenderConfig,
  TransactionalSendResult,
} from './outbox/transactional-send.js';
export type { HandlerOutbox } from './consumer/handler-context.js';
export type { LoggerLike, PinoLike } from './core/logger.js';
export { openTelemetryStatus } from './telemetry/otel-api.js';
export { DEFAULT_TELEMETRY_CONFIG } from './telemetry/pipeline-telemetry.js';
export type { TelemetryConfig } from './telemetry/pipeline-telemetry.js';
export { tracePublish } from './telemetry/trace-publish.js';
export { observeDeadLetterDepth } from './telemetry/dead-letter-gauge.js';
export type { DeadLetterGauge, DeadLetterGaugeConfig } from './telemetry/dead-letter-gauge.js';
export {
  ATTRIBUTES,
  INSTRUMENTATION_SCOPE,
  LATENCY_BUCKETS_S,
  METRICS,
} from './telemetry/telemetry-names.js';
export type { MeterProviderLike, TracerProviderLike } from './telemetry/otel-like.js';
