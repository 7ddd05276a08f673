import { TransportUnavailableError } from '../core/errors.js';
import { settle, type DeliveryResult, type Settler } from './settler.js';

/**
 * The broker calls of one delivery leased by a visibility timeout (RocketMQ, SQS), in order: a
 * keep-alive and the settle go one after the other, never at once (a visibility change may replace the
 * receipt handle the next call names), and the delivery is settled at most once; a keep-alive after
 * the settle is refused.
 */
export class SerialSettle {
  #settled = false;
  #chain: Promise<void> = Promise.resolve();

  /** Runs `extend` after the calls queued before it; rejects once the delivery is settled. */
  keepAlive(extend: () => Promise<void>): Promise<void> {
    return this.#serial(async () => {
      if (this.#settled) throw new TransportUnavailableError('the delivery is settled');
      await extend();
    });
  }

  /**
   * Settles `delivery` with `result` after the calls queued before it, the first time only; a settle
   * that throws goes to `failed` (the broker delivers the message again).
   */
  settle<D, R>(
    settler: Settler<D, R>,
    delivery: D,
    result: DeliveryResult,
    failed: (error: unknown) => void,
  ): Promise<void> {
    return this.#serial(async () => {
      if (this.#settled) return;
      this.#settled = true;
      try {
        await settle(settler, delivery, result);
      } catch (error) {
        failed(error);
      }
    });
  }

  #serial(step: () => Promise<void>): Promise<void> {
    const next = this.#chain.then(step);
    this.#chain = next.catch(() => undefined);
    return next;
  }
}
