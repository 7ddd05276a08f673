import type { Envelope } from '../core/envelope.js';
import { ConflictError, PermanentError } from '../core/errors.js';
import type { ExecutedOutcome, Outcome, OutcomeBase } from '../core/outcome.js';
import type { Serializer } from '../core/serializer.js';
import { fitMetadata } from '../ledger/claim-request.js';
import type { Claim, ClaimResult } from '../ledger/ledger.js';
import type { Mode } from './handler-context.js';
import type { RetryPolicy } from '../core/retry-policy.js';

/** Shortest wait before retrying a busy key. */
export const MIN_BUSY_DELAY_MS = 100;

/** A claim answer other than a win. */
export type LostClaim = Exclude<ClaimResult, { status: 'acquired' | 'reclaimed' }>;

/** Turns what happened to a delivery into its {@link Outcome}; one per pipeline. */
export class OutcomeBuilder {
  constructor(
    private readonly group: string,
    private readonly mode: Mode,
    private readonly retry: RetryPolicy,
    private readonly leaseMs: number,
    private readonly serializer: Serializer,
  ) {}

  base(envelope: Envelope, key: string | null, started: number): OutcomeBase {
    return {
      group: this.group,
      key,
      topic: envelope.topic,
      brokerId: envelope.brokerId,
      deliveryCount: envelope.deliveryCount,
      elapsedMs: performance.now() - started,
    };
  }

  executed(
    envelope: Envelope,
    key: string,
    started: number,
    claim: Claim,
    details: { reclaimed: boolean; leaseLost: boolean; result: unknown },
  ): ExecutedOutcome {
    // One literal of a fixed shape: spreads here cost more than the claim itself on a fast ledger.
    return {
      group: this.group,
      key,
      topic: envelope.topic,
      brokerId: envelope.brokerId,
      deliveryCount: envelope.deliveryCount,
      elapsedMs: performance.now() - started,
      kind: 'executed',
      action: 'ack',
      mode: this.mode,
      attempt: claim.attempt,
      reclaimed: details.reclaimed,
      leaseLost: details.leaseLost,
      result: details.result,
    };
  }

  /** Outcome of a claim that was not won: duplicate (acked), busy (retried), conflict (dead-lettered). */
  notWon(
    envelope: Envelope,
    key: string,
    claimed: LostClaim,
    started: number,
    fingerprint: string | null,
  ): Outcome {
    const base = this.base(envelope, key, started);
    const record = claimed.record;
    switch (claimed.status) {
      case 'duplicate':
        return {
          group: base.group,
          key: base.key,
          topic: base.topic,
          brokerId: base.brokerId,
          deliveryCount: base.deliveryCount,
          elapsedMs: base.elapsedMs,
          kind: 'duplicate',
          action: 'ack',
          // The ledger stores a long broker id as its digest: compare in the stored form.
          source: record.brokerId === fitMetadata(envelope.brokerId) ? 'redelivery' : 'republish',
          result: this.#replay(record.result),
        };
      case 'busy': {
        const remaining =
          record.leaseUntil === null ? MIN_BUSY_DELAY_MS : record.leaseUntil.getTime() - Date.now();
        const cap = this.retry.delaysMs[0] ?? this.leaseMs;
        return {
          ...base,
          kind: 'busy',
          action: 'retry',
          source: 'concurrent',
          delayMs: Math.max(MIN_BUSY_DELAY_MS, Math.min(remaining, cap)),
          nextDeliveryCount: envelope.deliveryCount,
        };
      }
      case 'conflict':
        return {
          ...base,
          kind: 'conflict',
          action: 'dead-letter',
          reason: 'conflict',
          error: new ConflictError(this.group, key, record.fingerprint, fingerprint),
        };
    }
  }

  /** The stored result of the first execution; one that cannot be read back is left out, not thrown. */
  #replay(result: string | null): unknown {
    if (result === null) return undefined;
    try {
      return this.serializer.deserialize(result);
    } catch {
      return undefined;
    }
  }

  /** Outcome after the handler failed for good in this delivery: the retry policy decides. */
  failed(envelope: Envelope, key: string | null, error: unknown, started: number): Outcome {
    const base = this.base(envelope, key, started);
    if (error instanceof PermanentError) {
      const reason =
        error.reason === 'missing-key' || error.reason === 'invalid-key' || error.reason === 'malformed'
          ? error.reason
          : 'permanent-error';
      return { ...base, kind: 'dead', action: 'dead-letter', reason, error };
    }
    const reconsumeTimes = Math.max(0, envelope.deliveryCount - 1);
    const decision = this.retry.decide(reconsumeTimes);
    if (decision.action === 'dead-letter') {
      return { ...base, kind: 'dead', action: 'dead-letter', reason: 'retries-exhausted', error };
    }
    return {
      ...base,
      kind: 'retry',
      action: 'retry',
      delayMs: decision.delayMs,
      nextDeliveryCount: envelope.deliveryCount + 1,
      reconsumeTimes,
      error,
    };
  }

  /**
   * The ledger could not be reached: never ack, try again after the first retry delay, without
   * charging the message a retry (an outage is not the message's fault).
   */
  unavailable(envelope: Envelope, key: string, error: unknown, started: number): Outcome {
    return {
      ...this.base(envelope, key, started),
      kind: 'retry',
      action: 'retry',
      delayMs: this.retry.delaysMs[0] ?? 1000,
      nextDeliveryCount: envelope.deliveryCount,
      reconsumeTimes: Math.max(0, envelope.deliveryCount - 1),
      error,
    };
  }
}
