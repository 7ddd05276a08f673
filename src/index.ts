export { createPipeline, DEFAULT_PIPELINE_CONFIG } from './consumer/pipeline.js';
export { MIN_BUSY_DELAY_MS, OutcomeBuilder } from './consumer/outcome-builder.js';
export type { LostClaim } from './consumer/outcome-builder.js';
export type { Decoder, Handler, Pipeline, PipelineConfig } from './consumer/pipeline.js';
export { downstreamKey } from './consumer/handler-context.js';
export type { HandlerContext, Mode } from './consumer/handler-context.js';
export type { PipelineMetrics } from './consumer/metrics.js';
export {
  checkRetention,
  DEFAULT_REPLAY_MARGIN,
  ROCKETMQ_DELAY_LEVELS,
  ROCKETMQ_FIRST_RETRY_LEVEL,
  ROCKETMQ_MAX_RECONSUME_TIMES,
  RetryPolicy,
} from './consumer/retry-policy.js';
export type { RetryDecision, RetryPolicyConfig } from './consumer/retry-policy.js';
export { formatDuration, parseDuration } from './core/duration.js';
export type { Duration } from './core/duration.js';
export { createEnvelope, encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from './core/envelope.js';
export type { Envelope, EnvelopeInit } from './core/envelope.js';
export {
  ClosedError,
  ConfigError,
  ConflictError,
  describeKey,
  errorText,
  LeaseLostError,
  LedgerUnavailableError,
  OncemqError,
  PermanentError,
  TransportClosedError,
} from './core/errors.js';
export type { OncemqErrorCode, PermanentReason } from './core/errors.js';
export { fingerprint, sha256Hex } from './core/fingerprint.js';
export type { FingerprintSource } from './core/fingerprint.js';
export { GROUP_PATTERN, validateGroup } from './core/group.js';
export {
  compileKeySource,
  DEFAULT_KEY_SOURCE,
  HASHED_KEY_PREFIX,
  MAX_KEY_BYTES,
  normalizeKey,
  parseJsonPath,
} from './core/key.js';
export type { KeyExtractor, KeySource } from './core/key.js';
export { SILENT_LOGGER } from './core/logger.js';
export type { Logger } from './core/logger.js';
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
  RetryOutcome,
} from './core/outcome.js';
export { JSON_SERIALIZER } from './core/serializer.js';
export type { Serializer } from './core/serializer.js';
export { CLAIM_RACE_ATTEMPTS, decideExisting } from './ledger/claim-decision.js';
export type { ExistingRowDecision } from './ledger/claim-decision.js';
export { DEFAULT_LEDGER_CAPABILITIES, MAX_REMARK_LENGTH } from './ledger/ledger.js';
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
export { quoteIdentifier, SQL_IDENTIFIER, sqlIdentifier } from './ledger/sql-identifier.js';
export { transition } from './ledger/transition.js';
export type { TransitionResult, TransitionSpec, TransitionValue } from './ledger/transition.js';
export type { SqlDialect, SqlValue } from './ledger/sql-dialect.js';
export { DEFAULT_RETENTION_CONFIG, startRetention } from './ledger/retention.js';
export type { Retention, RetentionConfig, RetentionProgress } from './ledger/retention.js';
export { TransportUnavailableError } from './core/errors.js';
export { DEFAULT_TRANSPORT_CAPABILITIES, toProcessor, UNIQUE_ID_HEADER } from './transport/transport.js';
export type {
  OutgoingMessage,
  Processor,
  ProcessorLike,
  PublishReceipt,
  Subscription,
  Transport,
  TransportCapabilities,
} from './transport/transport.js';
