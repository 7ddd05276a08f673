import type { Envelope } from '../../core/envelope.js';
import { OrderedLane } from '../ordered/ordered-lane.js';
import type { DeliveryResult } from '../settler.js';
import type { Processor } from '../transport.js';
import type { ConsumerContext } from './local-consumer.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Deliveries waiting in a member's lane, per message of a pull, before the member pulls again. */
const ORDERED_PENDING_PER_PULL = 16;

/**
 * The ordered consumption of one local member: every delivery it pulls is held in its lane, queued
 * behind the earlier ones of its key, and settled when its final outcome comes, while the member goes
 * on pulling; at most `pullBatchSize × 16` deliveries wait at once. When the member stops, what waits
 * for a retry stays unsettled (the queue's next owner gets it from the committed offset) and what runs
 * ends.
 */
export class LocalOrderedSubscription<D extends { readonly envelope: Envelope }> {
  readonly #ctx: ConsumerContext;
  readonly #lane: OrderedLane<D>;
  readonly #settle: (delivery: D, result: DeliveryResult) => void;

  /** `settle` settles a delivery with its final outcome, or leaves it to come again after an error. */
  constructor(
    ctx: ConsumerContext,
    processor: Processor,
    settle: (delivery: D, result: DeliveryResult) => void,
  ) {
    const { ordering, concurrency } = ctx.settings;
    this.#ctx = ctx;
    this.#settle = settle;
    this.#lane = new OrderedLane<D>({
      ordering: ordering ?? {},
      concurrency,
      logger: ctx.logger,
      processor,
      settle: (delivery, outcome) => {
        settle(delivery, { outcome });
        return Promise.resolve();
      },
    });
  }

  /**
   * Holds the pulled deliveries in the lane, `before(delivery)` called ahead of each, and resolves once
   * there is room for another pull (or the member stops running).
   */
  async submit(
    deliveries: readonly D[],
    before: (delivery: D) => void,
    running: () => boolean,
  ): Promise<void> {
    for (const delivery of deliveries) {
      before(delivery);
      this.#lane.submit(delivery.envelope, delivery, (error) => {
        this.#settle(delivery, { error });
      });
    }
    const { pullBatchSize, pollIntervalMs } = this.#ctx.settings;
    const limit = pullBatchSize * ORDERED_PENDING_PER_PULL;
    while (this.#lane.gate.pending >= limit && running()) await sleep(pollIntervalMs);
  }

  /** Closes the lane, and resolves once the deliveries running in it have been settled. */
  async close(): Promise<void> {
    this.#lane.close();
    await this.#lane.drained();
  }
}
