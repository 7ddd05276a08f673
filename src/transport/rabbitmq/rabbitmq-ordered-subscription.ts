import { OrderedLane } from '../ordered/ordered-lane.js';
import { ConfigError, errorText } from '../../core/errors.js';
import { settleOutcome } from '../settler.js';
import type { CheckedSubscribe } from '../subscribe-options.js';
import type { OrderingOptions, Processor } from '../transport.js';
import type { AmqpMessageLike } from './rabbitmq-driver.js';
import type { RabbitChannel } from './rabbitmq-channel.js';
import { withEnvelope, type EnvelopedDelivery } from './rabbitmq-settler.js';
import { RabbitMember, type RabbitSubscriptionContext } from './rabbitmq-member.js';
import { DRAIN_FENCE_HEADER, type OrderedPlan } from './rabbitmq-ordered-topology.js';
import { NOT_FOUND, replyCode } from './rabbitmq-topology.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** How often a member looks whether the old generation's queues are gone. */
const DRAIN_POLL_MS = 200;

/** Deliveries an ordered member runs at once, at most. */
const MAX_ORDERED_CONCURRENCY = 4096;

/** Deliveries a partition queue hands a member ahead of the running ones, per unit of `concurrency`. */
export const ORDERED_PREFETCH_PER_SLOT = 16;

/** An old partition queue of a drain was deleted before this member could consume it. */
class DrainedUnderUs extends Error {
  constructor(queue: string) {
    super(`the drained partition queue '${queue}' is gone`);
  }
}

/** The ordered lane of one channel, and what the member keeps beside it; all end with the channel. */
interface ChannelLane {
  readonly channel: RabbitChannel;
  /** The gate and the deliveries it holds, by broker id. */
  readonly ordered: OrderedLane<EnvelopedDelivery>;
  /** What the lane consumes. */
  readonly plan: OrderedPlan;
  /** Queues whose fence this lane reached and deleted (their consumer's cancel is expected). */
  readonly drained: Set<string>;
}

/**
 * One member of an ordered group. It consumes every partition queue of the group on one channel;
 * each partition queue has a single active consumer, so one member at a time takes a partition's
 * messages, in queue order, and the next member waiting takes over when it leaves. Deliveries go
 * through an {@link OrderedLane}: one ordering key at a time, retried in place, never to a retry
 * queue. A delivery is settled (acked, or its dead-letter copy confirmed and acked) before the next
 * one of its key starts. When the channel is lost the gate is closed: what waited in it is left to
 * the broker, which delivers it again, in order, to whichever member is then active.
 */
export class RabbitOrderedSubscription extends RabbitMember {
  readonly #ordering: OrderingOptions;
  readonly #lanes = new Set<ChannelLane>();
  #lane: ChannelLane | undefined;

  /** @internal made by the transport's `subscribe()`, after `checkSubscribe` */
  constructor(
    ctx: RabbitSubscriptionContext,
    subscribe: CheckedSubscribe,
    processor: Processor,
    consumerName?: string,
  ) {
    super(ctx, subscribe, processor, consumerName, MAX_ORDERED_CONCURRENCY);
    this.#ordering = subscribe.ordering ?? {};
  }

  /** @internal */
  protected consuming(): boolean {
    return this.#lane !== undefined;
  }

  /** Declares (or checks) the group's partitions and starts consuming; a failure here is the caller's. */
  async start(): Promise<void> {
    await this.#consume();
  }

  /** A lane whose final outcomes are settled on the deliveries of its own channel. */
  #newLane(): OrderedLane<EnvelopedDelivery> {
    return new OrderedLane<EnvelopedDelivery>({
      ordering: this.#ordering,
      concurrency: this.concurrency,
      logger: this.ctx.settings.logger,
      processor: this.processor,
      settle: (delivery, outcome) => settleOutcome(this.settler, delivery, outcome),
    });
  }

  /**
   * Consuming again after a loss never starts a drain (a member left on an old count would move the
   * group back): a partition count changed under the member stops it, with the reason logged.
   * @internal
   */
  protected async consumeAgain(): Promise<void> {
    try {
      await this.#consume('refuse');
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      this.ctx.settings.logger.error('oncemq: an ordered member stops: its group changed under it', {
        group: this.group,
        error: errorText(error),
      });
      this.failure = error;
      this.running = false;
      this.onClosed?.();
    }
  }

  /** Why the member stopped by itself (its group's partition count changed under it), if it did. */
  failure: ConfigError | undefined;

  async #consume(onPartitionChange = this.#ordering.onPartitionChange ?? 'refuse'): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#consumeOnce(onPartitionChange);
        return;
      } catch (error) {
        // An old queue of a drain deleted between the plan and the consume (the member active on it
        // reached its fence): drained, so plan again.
        if (!(error instanceof DrainedUnderUs) || attempt >= 5) throw error;
      }
    }
  }

  async #consumeOnce(onPartitionChange: 'refuse' | 'drain'): Promise<void> {
    const { topology, connection, settings } = this.ctx;
    const plan = await topology.ordered.orderedGroup(this.group, this.topics, onPartitionChange);
    const channel = await connection.channel(`consume ${this.group} ordered`, settings.publishTimeoutMs);
    const lane: ChannelLane = { channel, ordered: this.#newLane(), plan, drained: new Set() };
    try {
      // A connection cut while these wait for their reply fails them with the transport's error.
      await channel.call('prefetch', (raw) =>
        raw.prefetch(Math.min(65535, this.concurrency * ORDERED_PREFETCH_PER_SLOT)),
      );
      this.channels++;
      // An old generation being drained first; the partitions once it is gone.
      const first = plan.draining.length > 0 ? plan.draining : plan.queues;
      for (const queue of first) {
        try {
          await this.#consumeQueue(lane, queue);
        } catch (error) {
          if (replyCode(error) === NOT_FOUND && plan.draining.includes(queue))
            throw new DrainedUnderUs(queue);
          throw error;
        }
      }
    } catch (error) {
      lane.ordered.close();
      await channel.close();
      throw error;
    }
    if (!this.running) {
      lane.ordered.close();
      await channel.close();
      return;
    }
    this.#lane = lane;
    this.#lanes.add(lane);
    channel.onClose(() => this.#lost(lane, 'the channel closed'));
    if (plan.draining.length > 0) void this.#afterDrain(lane);
  }

  async #consumeQueue(lane: ChannelLane, queue: string): Promise<void> {
    await lane.channel.call('consume', (raw) =>
      raw.consume(queue, (message) => this.#receive(lane, queue, message), {
        noAck: false,
        consumerTag: `${this.consumerName}#${this.channels}@${queue}`,
      }),
    );
  }

  /**
   * Waits until every queue of the old generation is gone (whichever member was active on it
   * reached its fence), then ends the drain and consumes the new partitions: a key's messages in the
   * new generation start only after all of its old ones were settled.
   */
  async #afterDrain(lane: ChannelLane): Promise<void> {
    const { topology, settings } = this.ctx;
    try {
      for (;;) {
        if (!this.#current(lane)) return;
        let left = 0;
        for (const queue of lane.plan.draining) if (await topology.exists(queue)) left++;
        if (left === 0) break;
        await sleep(DRAIN_POLL_MS);
      }
      await topology.ordered.drainDone(this.group);
      if (!this.#current(lane)) return;
      settings.logger.info('oncemq: an ordered group was drained to its new partitions', {
        group: this.group,
      });
      for (const queue of lane.plan.queues) await this.#consumeQueue(lane, queue);
    } catch (error) {
      settings.logger.warn('oncemq: finishing a drain failed; consuming again', {
        group: this.group,
        error: errorText(error),
      });
      void lane.channel.close();
    }
  }

  /** Whether `lane` is still the member's consuming lane. */
  #current(lane: ChannelLane): boolean {
    return lane.channel.open && this.#lane === lane;
  }

  /**
   * The fence at the end of an old partition queue: once every earlier delivery of the queue on
   * this lane is settled, the queue holds nothing published before the drain; it is deleted. A
   * member whose own partitions were retired so consumes again, and finds the new count.
   */
  async #fence(lane: ChannelLane, queue: string, message: AmqpMessageLike): Promise<void> {
    const earlier = (): boolean => {
      for (const delivery of lane.ordered.held()) if (delivery.queue === queue) return true;
      return false;
    };
    while (lane.channel.open && earlier()) await sleep(20);
    if (!lane.channel.open) return;
    lane.drained.add(queue);
    lane.channel.ack(message);
    try {
      await this.ctx.topology.ordered.deleteDrained(queue);
    } catch (error) {
      lane.drained.delete(queue);
      this.ctx.settings.logger.warn('oncemq: deleting a drained partition queue failed', {
        queue,
        error: errorText(error),
      });
    }
    if (lane.plan.queues.includes(queue)) void lane.channel.close();
  }

  #receive(lane: ChannelLane, queue: string, message: AmqpMessageLike | null): void {
    if (message === null) {
      // A queue drained by this lane, or by the member active on it: expected.
      if (lane.drained.has(queue) || lane.plan.draining.includes(queue)) return;
      // The server cancelled a consumer (a queue deleted, a node lost): declare and consume again.
      this.ctx.topology.forget(queue);
      this.ctx.topology.ordered.forgetOrdered(this.group);
      void lane.channel.close();
      return;
    }
    if (message.properties.headers?.[DRAIN_FENCE_HEADER] !== undefined) {
      void this.#fence(lane, queue, message);
      return;
    }
    const delivery = withEnvelope({ channel: lane.channel, message, queue, settled: false });
    // A closed lane leaves the delivery unacked: the broker delivers it again.
    lane.ordered.submit(delivery.envelope, delivery, (error) => {
      this.ctx.settings.logger.error('oncemq: an ordered delivery failed', {
        group: this.group,
        error: errorText(error),
      });
    });
  }

  #lost(lane: ChannelLane, why: string): void {
    lane.ordered.close();
    void lane.ordered.drained().then(() => this.#lanes.delete(lane));
    if (this.#lane !== lane) return;
    this.#lane = undefined;
    if (this.running) this.recovery.start(why);
  }

  /**
   * Closes the gate (deliveries waiting behind their key or for a retry stay unacked), waits for the
   * running ones to be settled, then closes the channel, which hands every unacked delivery back to
   * its partition queue in order. The consumers are not cancelled first: a cancel would make the
   * next member active while this one still runs a key's message.
   */
  async close(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    await this.recovery.running;
    const lanes = [...this.#lanes];
    for (const lane of lanes) lane.ordered.close();
    await Promise.all(lanes.map((lane) => lane.ordered.drained()));
    await Promise.all(lanes.map((lane) => lane.channel.close()));
    this.#lanes.clear();
    this.#lane = undefined;
    this.onClosed?.();
  }
}
