/**
 * Names of the instruments, spans and attributes oncemq emits: OpenTelemetry's messaging semantic
 * conventions where they have a name for the thing, `oncemq.*` where they do not
 * (docs/observability.md lists each one).
 */

/** Instrumentation scope (meter and tracer name). */
export const INSTRUMENTATION_SCOPE = 'oncemq';

/** Names of the instruments oncemq creates on its meter (docs/observability.md gives units and attributes). */
export const METRICS = Object.freeze({
  /** Counter: every delivery the pipeline took to an outcome (semconv). */
  consumed: 'messaging.client.consumed.messages',
  /** Histogram, seconds: a delivery from taken to outcome (semconv). */
  processDuration: 'messaging.process.duration',
  /** Counter: outcomes by kind, duplicate source and dead-letter reason. */
  outcomes: 'oncemq.outcomes',
  /** Histogram, seconds: the ledger claim (in transactional mode up to the handler's start, or the whole transaction when not won). */
  claimDuration: 'oncemq.claim.duration',
  /** Histogram, seconds: the handler's run. */
  handlerDuration: 'oncemq.handler.duration',
  /** Observable gauge, seconds: age of the oldest PROCESSING claim of the group (ledgers with `inspect`). */
  oldestProcessing: 'oncemq.ledger.oldest_processing.age',
  /** Observable gauge: dead letters of the group (transports whose dead letters tell their depth). */
  deadLetterDepth: 'oncemq.dead_letter.depth',
});

/** Names of the attributes oncemq puts on its metrics and spans (docs/observability.md says where each goes). */
export const ATTRIBUTES = Object.freeze({
  /** The messaging system: `telemetry.system` for a consumer, the transport's name for a producer (semconv). */
  system: 'messaging.system',
  /** The consumer group (semconv). */
  group: 'messaging.consumer.group.name',
  /** The topic (semconv). */
  destination: 'messaging.destination.name',
  /** `process` for a consumer, `send` for a producer (semconv). */
  operationType: 'messaging.operation.type',
  /** `process` for a consumer, `send` for a producer (semconv). */
  operationName: 'messaging.operation.name',
  /** The broker id of the copy (semconv). */
  messageId: 'messaging.message.id',
  /** The class name of what a handler or a publish threw (semconv). */
  errorType: 'error.type',
  /** The outcome's `kind`. */
  outcome: 'oncemq.outcome',
  /** A duplicate's or busy outcome's source: `redelivery`, `republish`, `concurrent`. */
  duplicateSource: 'oncemq.duplicate.source',
  /** A dead-lettered outcome's reason. */
  deadLetterReason: 'oncemq.dead_letter.reason',
  /** The ledger's answer to the claim: `acquired`, `reclaimed`, `duplicate`, `busy`, `conflict`. */
  claimStatus: 'oncemq.claim.status',
  /** The business key (spans only: keys are unbounded, never a metric attribute). */
  key: 'oncemq.key',
  /** oncemq's delivery count of the envelope (spans only). */
  attempt: 'oncemq.attempt',
  /** The outcome's `action`: `ack`, `retry`, `dead-letter` (spans only). */
  action: 'oncemq.action',
});

/** Bucket bounds (seconds) of the latency histograms: 100 µs to 10 s. */
export const LATENCY_BUCKETS_S = Object.freeze([
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
]);
