/**
 * Names of the instruments, spans and attributes oncemq emits: OpenTelemetry's messaging semantic
 * conventions where they have a name for the thing, `oncemq.*` where they do not
 * (docs/observability.md lists each one).
 */

/** Instrumentation scope (meter and tracer name). */
export const INSTRUMENTATION_SCOPE = 'oncemq';

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

export const ATTRIBUTES = Object.freeze({
  system: 'messaging.system',
  group: 'messaging.consumer.group.name',
  destination: 'messaging.destination.name',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  messageId: 'messaging.message.id',
  errorType: 'error.type',
  outcome: 'oncemq.outcome',
  duplicateSource: 'oncemq.duplicate.source',
  deadLetterReason: 'oncemq.dead_letter.reason',
  claimStatus: 'oncemq.claim.status',
  key: 'oncemq.key',
  attempt: 'oncemq.attempt',
  action: 'oncemq.action',
});

/** Bucket bounds (seconds) of the latency histograms: 100 µs to 10 s. */
export const LATENCY_BUCKETS_S = Object.freeze([
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
]);
