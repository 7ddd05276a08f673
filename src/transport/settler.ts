import type { Outcome } from '../core/outcome.js';

/** What became of processing one delivery: an outcome, or the processor threw. */
export type DeliveryResult = { readonly outcome: Outcome } | { readonly error: unknown };

/** An outcome whose action is `ack`: the effect is applied (or was already). */
export type AckOutcome = Extract<Outcome, { readonly action: 'ack' }>;
/** An outcome whose action is `retry`: deliver again after `delayMs`, carrying `nextDeliveryCount`. */
export type RetryOutcome = Extract<Outcome, { readonly action: 'retry' }>;
/** An outcome whose action is `dead-letter`: store a copy with its reason, then let the original go. */
export type DeadLetterOutcome = Extract<Outcome, { readonly action: 'dead-letter' }>;
/** An outcome that ends a delivery: `ack` or `dead-letter`. */
export type FinalOutcome = AckOutcome | DeadLetterOutcome;

/**
 * What a broker does with one delivery once it has a result. Every transport's settler implements
 * these four; {@link settle} is the one place that reads `outcome.action`. `R` is what a settle
 * answers: `Promise<void>` for most brokers, `void` where settling is in memory (the local broker).
 */
export interface Settler<D, R = Promise<void>> {
  /** The effect is applied: let the broker forget the delivery. */
  ack(delivery: D, outcome: AckOutcome): R;
  /** Store the delivery again for after `outcome.delayMs`, carrying `outcome.nextDeliveryCount`; then let the original go. */
  retry(delivery: D, outcome: RetryOutcome): R;
  /** Store a dead-letter copy with `outcome.reason`, confirmed; then let the original go. */
  deadLetter(delivery: D, outcome: DeadLetterOutcome): R;
  /** The processor threw and there is no outcome: leave the delivery to come again (after a backoff). */
  fail(delivery: D, error: unknown): R;
}

/** Does with `delivery` what `result` says, through `settler`: the single switch over `outcome.action`. */
export function settle<D, R>(settler: Settler<D, R>, delivery: D, result: DeliveryResult): R {
  if ('error' in result) return settler.fail(delivery, result.error);
  return settleOutcome(settler, delivery, result.outcome);
}

/** Does with `delivery` what `outcome` says, through `settler`. */
export function settleOutcome<D, R>(settler: Settler<D, R>, delivery: D, outcome: Outcome): R {
  switch (outcome.action) {
    case 'ack':
      return settler.ack(delivery, outcome);
    case 'retry':
      return settler.retry(delivery, outcome);
    case 'dead-letter':
      return settler.deadLetter(delivery, outcome);
  }
}
