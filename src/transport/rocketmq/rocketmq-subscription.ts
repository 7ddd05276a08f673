import { LeasedSubscription, type LeasedWork } from '../leased-subscription.js';
import type { Subscription } from '../transport.js';
import { invisibleMs, RocketMQDelivery, type DeliveryContext } from './rocketmq-delivery.js';
import { REPLAY_GROUP_PROPERTY } from './rocketmq-names.js';
import type { RocketMQOrderedLane } from './rocketmq-ordered-subscription.js';

/** Most messages one receive asks for (the proxy's `maxMessageNum` limit is 32). */
const MAX_RECEIVE = 32;

/** What a subscription is made of; the transport builds it once the topics and the group exist. */
export interface RocketMQSubscriptionParts extends LeasedWork<RocketMQDelivery> {
  readonly ctx: DeliveryContext;
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
  readonly #ctx: DeliveryContext;
  readonly #leased: LeasedSubscription<RocketMQDelivery>;
  /** Called once closed (the transport forgets it). */
  onClose: () => void = () => undefined;

  /** @internal made by the transport's `subscribe()` */
  constructor(group: string, topics: readonly string[], parts: RocketMQSubscriptionParts) {
    this.group = group;
    this.topics = Object.freeze([...topics]);
    const { ctx } = parts;
    this.#ctx = ctx;
    this.#leased = new LeasedSubscription(parts, {
      group,
      maxReceive: MAX_RECEIVE,
      failureBackoffMs: ctx.failureBackoffMs,
      logger: ctx.logger,
      passOver: (delivery) => this.#passOver(delivery),
      leave: () => ctx.consumer.shutdown().catch(() => undefined),
      closed: () => this.onClose(),
    });
  }

  /** @internal started by the transport's `subscribe()` */
  start(): void {
    const ctx = this.#ctx;
    this.#leased.loop({
      receive: async (want) => {
        const views = await ctx.consumer.receive(want, invisibleMs(ctx.visibilityMs));
        return views.map((view) => new RocketMQDelivery(ctx, view));
      },
      // 50001 "settings is null" right after start-up, a proxy restart, a long poll cut: receive again.
      failed: 'oncemq: a RocketMQ receive failed; receiving again',
    });
  }

  /** A replayed copy is for its own group only: any other group acks it unprocessed. */
  #passOver(delivery: RocketMQDelivery): Promise<void> | undefined {
    const target = delivery.view.properties.get(REPLAY_GROUP_PROPERTY);
    if (target === undefined || target === this.group) return undefined;
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

  /**
   * Stops receiving (what a receive in progress still brings is left to the broker, unprocessed),
   * waits for every delivery in hand to reach its outcome and be settled, then leaves the group.
   */
  close(): Promise<void> {
    return this.#leased.close();
  }
}
