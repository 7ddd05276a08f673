import { errorText } from '../../core/errors.js';
import type { Outcome } from '../../core/outcome.js';
import { processAndSettleBatch, type DeliveryResult } from '../settle-batch.js';
import type { Processor, Subscription } from '../transport.js';
import { DeliverySlots } from '../delivery-slots.js';
import { invisibleMs, RocketMQDelivery, type DeliveryContext } from './rocketmq-delivery.js';
import { REPLAY_GROUP_PROPERTY } from './rocketmq-names.js';
import type { RocketMQOrderedLane } from './rocketmq-ordered-subscription.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Most messages one receive asks for (the proxy's `maxMessageNum` limit is 32). */
const MAX_RECEIVE = 32;

/** What a subscription is made of; the transport builds it once the topics and the group exist. */
export interface RocketMQSubscriptionParts {
  readonly ctx: DeliveryContext;
  readonly processor: Processor;
  readonly concurrency: number;
  /** Deliveries handed to `processBatch` at once; 1 hands them one by one. */
  readonly batchSize: number;
  /**
   * FIFO topics: deliveries go through this lane, retried in place (never made visible again for a
   * retry); one by one, never to the processor directly.
   */
  readonly lane: RocketMQOrderedLane | undefined;
}

/**
 * One member of a group: a `SimpleConsumer` receiving as many messages as there are free slots, each
 * invisible to the group's other members for the subscription's visibility (kept alive while its
 * handler runs), acked after its outcome, or made visible again after a retry's delay.
 */
export class RocketMQSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly #parts: RocketMQSubscriptionParts;
  readonly #slots: DeliverySlots;
  readonly #inflight = new Set<Promise<void>>();
  #loop: Promise<void> = Promise.resolve();
  #closing = false;
  #closed: Promise<void> | undefined;
  /** Called once closed (the transport forgets it). */
  onClose: () => void = () => undefined;

  /** @internal made by the transport's `subscribe()` */
  constructor(group: string, topics: readonly string[], parts: RocketMQSubscriptionParts) {
    this.group = group;
    this.topics = Object.freeze([...topics]);
    this.#parts = parts;
    this.#slots = new DeliverySlots(parts.concurrency);
  }

  /** @internal started by the transport's `subscribe()` */
  start(): void {
    this.#loop = this.#receiveLoop();
  }

  #isClosing(): boolean {
    return this.#closing;
  }

  async #receiveLoop(): Promise<void> {
    const { ctx, batchSize, concurrency } = this.#parts;
    while (!this.#closing) {
      const want = await this.#slots.acquire(Math.min(MAX_RECEIVE, batchSize > 1 ? batchSize : concurrency));
      if (want === 0) break;
      let got = 0;
      try {
        const views = await ctx.consumer.receive(want, invisibleMs(ctx.visibilityMs));
        got = views.length;
        const deliveries = views.map((view) => new RocketMQDelivery(ctx, view));
        this.#dispatch(deliveries);
      } catch (error) {
        if (this.#isClosing()) break;
        // 50001 "settings is null" right after start-up, a proxy restart, a long poll cut: receive again.
        ctx.logger.warn('oncemq: a RocketMQ receive failed; receiving again', {
          group: this.group,
          error: errorText(error),
        });
        await sleep(ctx.failureBackoffMs);
      } finally {
        this.#slots.release(Math.max(0, want - got));
      }
    }
  }

  #dispatch(deliveries: readonly RocketMQDelivery[]): void {
    const release = (count: number) => () => this.#slots.release(count);
    const work: RocketMQDelivery[] = [];
    for (const delivery of deliveries) {
      const target = delivery.view.properties.get(REPLAY_GROUP_PROPERTY);
      if (this.#closing) this.#track(delivery.giveBack(), release(1));
      // A replayed copy is for its own group only: any other group acks it unprocessed.
      else if (target !== undefined && target !== this.group) this.#track(this.#skip(delivery), release(1));
      else work.push(delivery);
    }
    if (work.length === 0) return;
    if (this.#parts.batchSize > 1 && this.#parts.processor.processBatch !== undefined) {
      this.#track(this.#processBatch(work), release(work.length));
      return;
    }
    for (const delivery of work) this.#track(this.#processOne(delivery), release(1));
  }

  #skip(delivery: RocketMQDelivery): Promise<void> {
    const e = delivery.envelope;
    return delivery.settle({
      outcome: {
        kind: 'duplicate',
        action: 'ack',
        source: 'republish',
        group: this.group,
        key: null,
        topic: e.topic,
        brokerId: e.brokerId,
        deliveryCount: e.deliveryCount,
        elapsedMs: 0,
      },
    });
  }

  #track(work: Promise<void>, done: () => void): void {
    const tracked = work.finally(() => {
      this.#inflight.delete(tracked);
      done();
    });
    this.#inflight.add(tracked);
  }

  async #processOne(delivery: RocketMQDelivery): Promise<void> {
    const { lane, processor } = this.#parts;
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

  async #processBatch(batch: readonly RocketMQDelivery[]): Promise<void> {
    const { processor, lane } = this.#parts;
    if (processor.processBatch === undefined) return;
    // On FIFO topics a batch's retry runs again in place, through the lane: never back to the broker.
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
   * Stops receiving (what a receive in progress still brings is left to the broker, unprocessed),
   * waits for every delivery in hand to reach its outcome and be settled, then leaves the group.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    this.#slots.close();
    this.#parts.lane?.close();
    await this.#loop;
    while (this.#inflight.size > 0) await Promise.all([...this.#inflight]);
    await this.#parts.lane?.drained();
    await this.#parts.ctx.consumer.shutdown().catch(() => undefined);
    this.onClose();
  }
}
