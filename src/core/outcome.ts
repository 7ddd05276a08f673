/** Where a duplicate came from, told by comparing broker ids (see DESIGN.md §1). */
export type DuplicateSource =
  /** The same stored copy again: lost ack, crash after commit, rebalance. */
  | 'redelivery'
  /** Another stored copy of the same event: producer retry, relay resend, replay. */
  | 'republish'
  /** A copy that arrived while another was still being processed. */
  | 'concurrent';

/** What the transport must do with the delivery. */
export type OutcomeAction = 'ack' | 'retry' | 'dead-letter';

/** Why a message was dead-lettered. */
export type DeadLetterReason =
  | 'missing-key'
  | 'invalid-key'
  | 'malformed'
  | 'conflict'
  | 'permanent-error'
  | 'retries-exhausted'
  | 'invalid-header'
  | (string & {});

export interface OutcomeBase {
  readonly group: string;
  /** The normalized business key; `null` when none could be read. */
  readonly key: string | null;
  readonly topic: string;
  readonly brokerId: string;
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

export interface ExecutedOutcome extends OutcomeBase {
  readonly kind: 'executed';
  readonly action: 'ack';
  readonly mode: 'transactional' | 'leased';
  /** The ledger attempt that succeeded (1 for a first claim). */
  readonly attempt: number;
  /** The claim took over an expired lease or a failed attempt. */
  readonly reclaimed: boolean;
  /** Leased mode: the lease was lost before completion; another owner may run the effect again. */
  readonly leaseLost: boolean;
  readonly result?: unknown;
}

export interface DuplicateOutcome extends OutcomeBase {
  readonly kind: 'duplicate';
  readonly action: 'ack';
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

export interface BusyOutcome extends OutcomeBase, RetryAction {
  readonly kind: 'busy';
  readonly source: 'concurrent';
}

export interface ConflictOutcome extends OutcomeBase {
  readonly kind: 'conflict';
  readonly action: 'dead-letter';
  readonly reason: 'conflict';
  readonly error: Error;
}

export interface RetryOutcome extends OutcomeBase, RetryAction {
  readonly kind: 'retry';
  /** How many times this message has been reconsumed before this retry (RocketMQ's reconsumeTimes). */
  readonly reconsumeTimes: number;
  readonly error: unknown;
}

export interface DeadOutcome extends OutcomeBase {
  readonly kind: 'dead';
  readonly action: 'dead-letter';
  readonly reason: DeadLetterReason;
  readonly error: unknown;
}

/** What became of one delivery. Every delivery ends in exactly one outcome. */
export type Outcome =
  ExecutedOutcome | DuplicateOutcome | BusyOutcome | ConflictOutcome | RetryOutcome | DeadOutcome;

export type OutcomeKind = Outcome['kind'];
