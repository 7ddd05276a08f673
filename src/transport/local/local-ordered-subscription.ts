import type { Envelope } from '../../core/envelope.js';
import type { Logger } from '../../core/logger.js';
import { OrderedLane } from '../ordered/ordered-lane.js';
import type { DeliveryResult } from '../settler.js';
import type { OrderingOptions, Processor } from '../transport.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Deliveries waiting in a member's lane, per message of a pull, before the member pulls again. */
const ORDERED_PENDING_PER_PULL = 16;

/** The member's settings its ordered consumption reads. */
export interface LocalOrderedSettings {
  readonly ordering: OrderingOptions;
  /** Deliveries of different keys processed at once. */
  readonly concurrency: number;
  readonly pullBatchSize: number;
  readonly pollIntervalMs: number;
  readonly logger: Logger;
}

/**
 * The ordered consumption of one local member: every delivery it pulls is held in its lane, queued
 * behind the earlier ones of its key, and settled when its final outcome comes, while the member goes
 * on pulling; at most `pullBatchSize × 16` deliveries wait at once. When the member stops, what waits
 * for a retry stays unsettled (the queue's next owner gets it from the committed offset) and what runs
 * ends.
 */
export class LocalOrderedSubscription<D extends { readonly envelope: Envelope }> {
  readonly #settings: LocalOrderedSettings;
  readonly #lane: OrderedLane<D>;
  readonly #settle: (delivery: D, result: DeliveryResult) => void;

  /** `settle` settles a delivery with its final outcome, or leaves it to come again after an error. */
  constructor(
    settings: LocalOrderedSettings,
    processor: Processor,
    settle: (delivery: D, result: DeliveryResult) => void,
  ) {
    this.#settings = settings;
    this.#settle = settle;
    this.#lane = new OrderedLane<D>({
      ordering: settings.ordering,
      concurrency: settings.concurrency,
      logger: settings.logger,
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
    const { pullBatchSize, pollIntervalMs } = this.#settings;
    const limit = pullBatchSize * ORDERED_PENDING_PER_PULL;
    while (this.#lane.gate.pending >= limit && running()) await sleep(pollIntervalMs);
  }

  /** Closes the lane, and resolves once the deliveries running in it have been settled. */
  async close(): Promise<void> {
    this.#lane.close();
    await this.#lane.drained();
  }
}
