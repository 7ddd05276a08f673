import { setTimeout as sleep } from 'node:timers/promises';
import { errorText } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Outcome } from '../core/outcome.js';
import { DeliverySlots } from './delivery-slots.js';
import type { LeasedLane } from './ordered/leased-lane.js';
import { processAndSettleBatch, type DeliveryResult, type SettleableDelivery } from './settle-batch.js';
import type { Processor } from './transport.js';

/** A delivery leased by a visibility timeout: settled once, or given back to the broker unprocessed. */
export interface LeasedDelivery extends SettleableDelivery {
  /** Leaves the message to the broker unprocessed: it comes again once its invisibility ends. */
  giveBack(): Promise<void>;
}

/** What a transport chose for a leased subscription: its processor, concurrency, batch size and lane. */
export interface LeasedWork<D extends LeasedDelivery> {
  readonly processor: Processor;
  readonly concurrency: number;
  /** Deliveries handed to `processBatch` at once; 1 hands them one by one. */
  readonly batchSize: number;
  /** Deliveries go through this lane (retried in place), never to the processor directly. */
  readonly lane: LeasedLane<D> | undefined;
}

/** What the broker's subscription tells a {@link LeasedSubscription} of itself. */
export interface LeasedBroker<D extends LeasedDelivery> {
  readonly group: string;
  /** Most messages one receive asks for (the broker's limit). */
  readonly maxReceive: number;
  /** The pause after a failed receive. */
  readonly failureBackoffMs: number;
  readonly logger: Logger;
  /** A delivery that is not for this subscription: the settle that lets it go unprocessed, else undefined. */
  readonly passOver?: (delivery: D) => Promise<void> | undefined;
  /** Leaves the broker, once every delivery in hand is settled (a consumer's shutdown). */
  readonly leave?: () => Promise<void>;
  /** Called once closed, last. */
  readonly closed: () => void;
}

/** One receive loop: how it asks the broker for up to `want` deliveries, and what it logs when that fails. */
export interface LeasedReceive<D> {
  /** Receives up to `want` deliveries; `signal` aborts once the subscription closes. */
  readonly receive: (want: number, signal: AbortSignal) => Promise<readonly D[]>;
  /** The warning logged when a receive fails (then the loop receives again, after the backoff). */
  readonly failed: string;
  /** What the warning says besides the group and the error. */
  readonly details?: Readonly<Record<string, string>>;
}

/**
 * The receive-and-dispatch body of a subscription whose deliveries are leased by a visibility timeout
 * (RocketMQ, SQS): receive loops take free slots before they receive (so no message waits invisible in
 * a buffer), each delivery runs through the lane, or a batch goes to `processBatch`, or one by one to
 * `process`, and is settled with its result. Closing stops the loops (a receive in progress is
 * aborted), gives back what a receive still brings, waits for every delivery in hand to be settled and
 * for the lane to drain, then leaves the broker.
 */
export class LeasedSubscription<D extends LeasedDelivery> {
  readonly #work: LeasedWork<D>;
  readonly #broker: LeasedBroker<D>;
  readonly #slots: DeliverySlots;
  readonly #inflight = new Set<Promise<void>>();
  readonly #abort = new AbortController();
  readonly #loops: Promise<void>[] = [];
  #closing = false;
  #closed: Promise<void> | undefined;

  constructor(work: LeasedWork<D>, broker: LeasedBroker<D>) {
    this.#work = work;
    this.#broker = broker;
    this.#slots = new DeliverySlots(work.concurrency);
  }

  /** Starts one receive loop; it runs until the subscription closes. */
  loop(receiving: LeasedReceive<D>): void {
    this.#loops.push(this.#receiveLoop(receiving));
  }

  #isClosing(): boolean {
    return this.#closing;
  }

  async #receiveLoop({ receive, failed, details }: LeasedReceive<D>): Promise<void> {
    const { batchSize, concurrency } = this.#work;
    const { group, maxReceive, failureBackoffMs, logger } = this.#broker;
    while (!this.#closing) {
      const want = await this.#slots.acquire(Math.min(maxReceive, batchSize > 1 ? batchSize : concurrency));
      if (want === 0) break;
      let got = 0;
      try {
        const deliveries = await receive(want, this.#abort.signal);
        got = deliveries.length;
        this.#dispatch(deliveries);
      } catch (error) {
        if (this.#isClosing()) break;
        logger.warn(failed, { group, ...details, error: errorText(error) });
        await sleep(failureBackoffMs);
      } finally {
        this.#slots.release(Math.max(0, want - got));
      }
    }
  }

  #dispatch(deliveries: readonly D[]): void {
    const release = (count: number) => () => this.#slots.release(count);
    const work: D[] = [];
    for (const delivery of deliveries) {
      if (this.#closing) {
        this.#track(delivery.giveBack(), release(1));
        continue;
      }
      const passed = this.#broker.passOver?.(delivery);
      if (passed === undefined) work.push(delivery);
      else this.#track(passed, release(1));
    }
    if (work.length === 0) return;
    if (this.#work.batchSize > 1 && this.#work.processor.processBatch !== undefined) {
      this.#track(this.#processBatch(work), release(work.length));
      return;
    }
    for (const delivery of work) this.#track(this.#processOne(delivery), release(1));
  }

  #track(work: Promise<void>, done: () => void): void {
    const tracked = work.finally(() => {
      this.#inflight.delete(tracked);
      done();
    });
    this.#inflight.add(tracked);
  }

  async #processOne(delivery: D): Promise<void> {
    const { lane, processor } = this.#work;
    if (lane !== undefined) {
      await lane.handle(delivery);
      return;
    }
    let outcome: Outcome;
    try {
      outcome = await processor.process(delivery.envelope);
    } catch (error) {
      await delivery.settle({ error });
      return;
    }
    await delivery.settle({ outcome });
  }

  async #processBatch(batch: readonly D[]): Promise<void> {
    const { processor, lane } = this.#work;
    if (processor.processBatch === undefined) return;
    // With a lane, a batch's retry runs again in place, through the lane: never back to the broker.
    const deliveries =
      lane === undefined
        ? batch
        : batch.map((delivery) => ({
            envelope: delivery.envelope,
            settle: (result: DeliveryResult) =>
              'outcome' in result && !lane.answers(result.outcome)
                ? lane.handle(delivery, result.outcome)
                : delivery.settle(result),
          }));
    await processAndSettleBatch(processor.processBatch.bind(processor), deliveries);
  }

  /**
   * Stops receiving (a receive in progress is aborted; what one still brings is given back), waits for
   * every delivery in hand to reach its outcome and be settled, then leaves the broker.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    this.#slots.close();
    this.#abort.abort();
    this.#work.lane?.close();
    await Promise.all(this.#loops);
    while (this.#inflight.size > 0) await Promise.all([...this.#inflight]);
    await this.#work.lane?.drained();
    await this.#broker.leave?.();
    this.#broker.closed();
  }
}
