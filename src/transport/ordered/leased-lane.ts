import type { Logger } from '../../core/logger.js';
import type { Outcome } from '../../core/outcome.js';
import type { SettleableDelivery } from '../settle-batch.js';
import type { OrderingOptions, Processor } from '../transport.js';
import { OrderedLane } from './ordered-lane.js';

/**
 * The ordered path of a subscription over deliveries leased by a visibility timeout (RocketMQ, SQS): the
 * deliveries its receive loops hand over go through one {@link OrderedLane}, queued behind the earlier
 * ones of their ordering key and retried in place (kept invisible meanwhile); a final outcome is settled
 * at the broker before the key's next delivery starts. A delivery still waiting when the lane closes
 * stays unsettled: the broker hands it out again once its invisibility ends, in its message group's order.
 */
export class LeasedLane<D extends SettleableDelivery> {
  readonly #lane: OrderedLane<D>;

  constructor(processor: Processor, ordering: OrderingOptions, concurrency: number, logger: Logger) {
    this.#lane = new OrderedLane<D>({
      ordering,
      concurrency,
      logger,
      processor,
      settle: (delivery, outcome) => delivery.settle({ outcome }),
    });
  }

  /**
   * Runs `delivery` in its key's order; resolves once it is settled, or left to the broker by a close.
   * `answered`: the outcome of an attempt already made (a batch's retry), which the lane goes on from.
   */
  handle(delivery: D, answered?: Outcome): Promise<void> {
    return new Promise((resolve) => {
      this.#lane.submit(
        delivery.envelope,
        delivery,
        (error) => {
          void delivery.settle({ error });
        },
        resolve,
        answered,
      );
    });
  }

  /** Whether `outcome` ends a delivery (settle it) rather than running it again in place. */
  answers(outcome: Outcome): boolean {
    return this.#lane.gate.answers(outcome);
  }

  /** Stops retrying: deliveries waiting behind their key or for a retry stay unsettled. */
  close(): void {
    this.#lane.close();
  }

  /** Resolves once no delivery is pending in the lane. */
  drained(): Promise<void> {
    return this.#lane.drained();
  }
}
