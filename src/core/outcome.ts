/** Where a duplicate came from, told by comparing broker ids (see DESIGN.md §1). */
export type DuplicateSource =
  /** The same stored copy again: lost ack, crash after commit, rebalance. */
  | 'redelivery'
  /** Another stored copy of the same event: producer retry, relay resend, replay. */
  | 'republish'
  /** A copy that arrived while another was still being processed. */
  | 'concurrent';

/**
 * What the transport must do with the delivery: `ack` it, `retry` it (deliver it again after
 * `delayMs`, carrying `nextDeliveryCount`), or `dead-letter` it (with `reason`). This is the field a
 * consumer loop switches on to settle a delivery; {@link OutcomeKind} says what happened, and several
 * kinds share one action.
 */
export type OutcomeAction = 'ack' | 'retry' | 'dead-letter';

/**
 * Why a message was dead-lettered: `missing-key`, `invalid-key`, `malformed` (the body did not
 * decode), `conflict` (the key was reused with another payload), `permanent-error` (a
 * {@link PermanentError} or a result that cannot be stored), `retries-exhausted`, `invalid-header`
 * (a header oncemq reads was not written by oncemq), or a transport's own (a broker-side delivery
 * limit reached).
 */
export type DeadLetterReason =
  | 'missing-key'
  | 'invalid-key'
  | 'malformed'
  | 'conflict'
  | 'permanent-error'
  | 'retries-exhausted'
  | 'invalid-header'
  | (string & {});

/** What every outcome tells, whatever its kind: which delivery it was, and of which group and key. */
export interface OutcomeBase {
  /** The pipeline's consumer group; empty for an outcome a transport decided without a pipeline. */
  readonly group: string;
  /** The normalized business key; `null` when none could be read. */
  readonly key: string | null;
  /** The topic the delivery came from. */
  readonly topic: string;
  /** The broker's id of the delivered copy (`envelope.brokerId`). */
  readonly brokerId: string;
  /** The envelope's `deliveryCount`: 1 on the first delivery, +1 per delayed retry charged to the message. */
  readonly deliveryCount: number;
  /** Time spent in the pipeline for this delivery. */
  readonly elapsedMs: number;
}

/** The base of an outcome decided without running the pipeline: no group, no key read, no time spent. */
export function unprocessedBase(delivery: {
  readonly topic: string;
  readonly brokerId: string;
  readonly deliveryCount: number;
}): OutcomeBase {
  const { topic, brokerId, deliveryCount } = delivery;
  return { group: '', key: null, topic, brokerId, deliveryCount, elapsedMs: 0 };
}

/** The claim was won and the handler's effect committed: ack. */
export interface ExecutedOutcome extends OutcomeBase {
  /** What happened: this delivery's effect was applied. */
  readonly kind: 'executed';
  /** Ack the delivery. */
  readonly action: 'ack';
  /** The pipeline's mode: `transactional` (the effect committed with the claim) or `leased`. */
  readonly mode: 'transactional' | 'leased';
  /** The ledger attempt that succeeded (1 for a first claim). */
  readonly attempt: number;
  /** The claim took over an expired lease or a failed attempt. */
  readonly reclaimed: boolean;
  /** Leased mode: the lease was lost before completion; another owner may run the effect again. */
  readonly leaseLost: boolean;
  /** What the handler returned, as stored for duplicates; absent when it returned nothing. */
  readonly result?: unknown;
}

/** The key's effect was already applied by another copy: ack without running the handler. */
export interface DuplicateOutcome extends OutcomeBase {
  /** What happened: a copy of an event already applied, absorbed. */
  readonly kind: 'duplicate';
  /** Ack the delivery. */
  readonly action: 'ack';
  /** `redelivery` when the broker id matches the recorded one, else `republish`. */
  readonly source: Exclude<DuplicateSource, 'concurrent'>;
  /** The result stored by the first execution, replayed. */
  readonly result?: unknown;
}

/**
 * The longest wait a `retry` outcome asks for that transports honour in full: `RetryPolicy` refuses
 * longer delays, and a transport that writes a retry copy's due time bounds the due times it reads by it.
 */
export const MAX_RETRY_DELAY_MS = 7 * 24 * 3_600_000;

/** What every outcome whose action is `retry` tells the transport. */
export interface RetryAction {
  /** Deliver the message again after {@link delayMs}; do not ack this copy before the retry is stored. */
  readonly action: 'retry';
  /** Wait before the copy is delivered again. */
  readonly delayMs: number;
  /**
   * The `deliveryCount` of the envelope the copy must carry when it comes back: one more when the retry
   * is charged to the message (its handler failed), the same when it is not (a `busy` key, an
   * unreachable ledger), so that waiting for another copy or an outage never uses up retries.
   */
  readonly nextDeliveryCount: number;
}

/**
 * Another copy of the key holds a live lease (it is running now): retry after the lease's remainder,
 * not charged to the message (`nextDeliveryCount` stays `deliveryCount`).
 */
export interface BusyOutcome extends OutcomeBase, RetryAction {
  /** What happened: the key is being processed elsewhere right now. */
  readonly kind: 'busy';
  /** Always `concurrent`: a copy that arrived while another was running. */
  readonly source: 'concurrent';
}

/** The key was recorded with another payload fingerprint: key reuse, dead-lettered with reason `conflict`. */
export interface ConflictOutcome extends OutcomeBase {
  /** What happened: the same key arrived with a different payload. */
  readonly kind: 'conflict';
  /** Dead-letter the delivery; no retry can make it succeed. */
  readonly action: 'dead-letter';
  /** Always `conflict`. */
  readonly reason: 'conflict';
  /** A {@link ConflictError} with both fingerprints. */
  readonly error: Error;
}

/**
 * The handler failed (or the ledger could not be reached) and retries are left: deliver again after
 * `delayMs`, carrying `nextDeliveryCount`.
 */
export interface RetryOutcome extends OutcomeBase, RetryAction {
  /** What happened: this attempt failed and will be tried again. */
  readonly kind: 'retry';
  /** How many times this message has been reconsumed before this retry (RocketMQ's reconsumeTimes). */
  readonly reconsumeTimes: number;
  /** What the handler threw, or the {@link LedgerUnavailableError}; any thrown value, not only an `Error`. */
  readonly error: unknown;
}

/**
 * The message can never succeed, or has used up its retries: dead-letter it with `reason`
 * (`missing-key`, `malformed`, `permanent-error`, `retries-exhausted`, …).
 */
export interface DeadOutcome extends OutcomeBase {
  /** What happened: the message was given up on. */
  readonly kind: 'dead';
  /** Dead-letter the delivery. */
  readonly action: 'dead-letter';
  /** Why: the dead-letter queue keeps it with the message. */
  readonly reason: DeadLetterReason;
  /** The last error: the handler's throw, the decoder's, or the key reader's; any thrown value. */
  readonly error: unknown;
}

/**
 * What became of one delivery. Every delivery ends in exactly one outcome.
 *
 * Two fields say two things. `action` is what to do with the delivery, and the only field a consumer
 * loop needs to settle it: `ack`, `retry` (after `delayMs`, carrying `nextDeliveryCount`) or
 * `dead-letter` (with `reason`). `kind` is what happened, for logs, metrics and tests: `executed` and
 * `duplicate` are both acked, `busy` and `retry` both retried, `conflict` and `dead` both
 * dead-lettered. Both narrow the union: `outcome.kind === 'duplicate'` gives `source`,
 * `outcome.action === 'retry'` gives `delayMs` and `nextDeliveryCount`.
 *
 * @example
 * ```ts
 * const outcome = await pipeline.process(envelope);
 * switch (outcome.action) {
 *   case 'ack': ack(); break;
 *   case 'retry': redeliver(outcome.delayMs, outcome.nextDeliveryCount); break;
 *   case 'dead-letter': deadLetter(outcome.reason); break;
 * }
 * counts[outcome.kind]++; // executed | duplicate | busy | conflict | retry | dead
 * ```
 */
export type Outcome =
  ExecutedOutcome | DuplicateOutcome | BusyOutcome | ConflictOutcome | RetryOutcome | DeadOutcome;

/**
 * What happened to a delivery: `executed`, `duplicate`, `busy`, `conflict`, `retry` or `dead`. Count
 * and log by it; settle by {@link OutcomeAction} (`outcome.action`) instead, which is what the kinds
 * come down to for the broker.
 */
export type OutcomeKind = Outcome['kind'];
