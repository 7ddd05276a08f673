import { errorText } from '../core/errors.js';
import { SILENT_LOGGER, type Logger } from '../core/logger.js';
import type { Outcome } from '../core/outcome.js';
import type { DeliveryTrace } from '../telemetry/delivery-trace.js';
import { OutcomeCounters, type PipelineMetrics } from './metrics.js';

/** Records every outcome once: counts it, logs it, tells the listener. Never throws. */
export class OutcomeRecorder {
  readonly #counters = new OutcomeCounters();

  constructor(
    private readonly group: string,
    private readonly logger: Logger,
    private readonly listener: ((outcome: Outcome) => void) | undefined,
  ) {}

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
      logger.info('oncemq: retry scheduled', {
        group,
        key: outcome.key,
        brokerId: outcome.brokerId,
        attempt: outcome.deliveryCount,
        outcome: outcome.kind,
        delayMs: outcome.delayMs,
        charged: outcome.nextDeliveryCount > outcome.deliveryCount,
        error: errorText(outcome.error),
      });
    } else if (logger !== SILENT_LOGGER) {
      // The common outcomes are logged at debug level: without a logger, no fields are built for them.
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
