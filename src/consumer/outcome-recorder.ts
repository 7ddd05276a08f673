import { errorText, LeaseLostError } from '../core/errors.js';
import { logsDebug, type Logger } from '../core/logger.js';
import type { Outcome, RetryOutcome } from '../core/outcome.js';
import type { DeliveryTrace } from '../telemetry/delivery-trace.js';
import { OutcomeCounters, type PipelineMetrics } from './metrics.js';

/**
 * What a retry's line says: the handler failed (the retry is charged to the message), or the message
 * comes again uncharged because the lease was lost or the ledger could not be reached.
 */
function retryMessage(outcome: RetryOutcome): string {
  if (outcome.nextDeliveryCount > outcome.deliveryCount) return 'oncemq: the handler failed; retry scheduled';
  if (outcome.error instanceof LeaseLostError)
    return 'oncemq: lease lost; the message comes again (not charged)';
  return 'oncemq: ledger unavailable; the message comes again (not charged)';
}

/** Records every outcome once: counts it, logs it, tells the listener. Never throws. */
export class OutcomeRecorder {
  readonly #counters = new OutcomeCounters();
  readonly #debug: boolean;

  constructor(
    private readonly group: string,
    private readonly logger: Logger,
    private readonly listener: ((outcome: Outcome) => void) | undefined,
  ) {
    this.#debug = logsDebug(logger);
  }

  record(outcome: Outcome, trace: DeliveryTrace): Outcome {
    this.#counters.record(outcome);
    try {
      trace.finish(outcome);
    } catch {
      // Telemetry that throws (a broken exporter) must not turn an outcome into a failure either.
    }
    try {
      this.#log(outcome);
    } catch {
      // A logger that throws must not turn an outcome into a failure of the delivery.
    }
    if (this.listener !== undefined) {
      try {
        this.listener(outcome);
      } catch (error) {
        try {
          this.logger.error('oncemq: onOutcome listener threw', { error: errorText(error) });
        } catch {
          // as above
        }
      }
    }
    return outcome;
  }

  #log(outcome: Outcome): void {
    const { group, logger } = this;
    if (outcome.kind === 'dead' || outcome.kind === 'conflict') {
      logger.warn(`oncemq: dead-lettered (${outcome.reason})`, {
        group,
        key: outcome.key,
        brokerId: outcome.brokerId,
        attempt: outcome.deliveryCount,
        outcome: outcome.kind,
        error: errorText(outcome.error),
      });
    } else if (outcome.kind === 'retry') {
      logger.warn(retryMessage(outcome), {
        group,
        key: outcome.key,
        brokerId: outcome.brokerId,
        attempt: outcome.deliveryCount,
        outcome: outcome.kind,
        delayMs: outcome.delayMs,
        charged: outcome.nextDeliveryCount > outcome.deliveryCount,
        error: errorText(outcome.error),
      });
    } else if (this.#debug) {
      // The common outcomes are logged at debug level: a logger that drops debug lines gets no fields built.
      logger.debug(`oncemq: ${outcome.kind}`, {
        group,
        key: outcome.key,
        brokerId: outcome.brokerId,
        attempt: outcome.deliveryCount,
        outcome: outcome.kind,
        ...(outcome.kind === 'executed' ? { execution: outcome.attempt } : { source: outcome.source }),
      });
    }
  }

  metrics(): PipelineMetrics {
    return this.#counters.snapshot();
  }
}
