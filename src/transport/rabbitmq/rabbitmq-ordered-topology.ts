import { TransportUnavailableError } from '../../core/errors.js';
import { checkPartitionCount } from '../ordered/partition-count.js';
import { partitionOf } from '../partitions.js';
import type { RabbitChannel } from './rabbitmq-channel.js';
import type { RabbitSettings } from './rabbitmq-config.js';
import { RABBIT_SLOTS, slotKey, type RabbitNames } from './rabbitmq-names.js';
import { RabbitPartitionCountStore } from './rabbitmq-partition-count.js';
import type { RabbitTopology } from './rabbitmq-topology.js';

/** How long a member waits for a drain marker's list while other members read it. */
const DRAIN_LIST_WAIT_MS = 10_000;

/** The header of the message a drain puts at the end of an old partition queue. */
export const DRAIN_FENCE_HEADER = 'oncemq-drain-fence';

/** What an ordered member consumes: its partition queues, after the old ones still being drained. */
export interface OrderedPlan {
  readonly queues: readonly string[];
  readonly draining: readonly string[];
}

/**
 * What an ordered group needs of the broker: its partition count recorded (or compared, refused or
 * drained through {@link checkPartitionCount}), one partition queue per partition with a single active
 * consumer, bound to its slots of every topic, and the drain from one count to another (a fence at the
 * end of every old queue, consumed before the new ones). Every step runs through the group topology's
 * short-lived channels.
 */
export class RabbitOrderedTopology {
  readonly #topology: RabbitTopology;
  readonly #settings: RabbitSettings;
  readonly #names: RabbitNames;
  /** Slot bindings made (`queue\nrouting key`): a step cut halfway does not make them again. */
  readonly #bound = new Set<string>();

  constructor(topology: RabbitTopology) {
    this.#topology = topology;
    this.#settings = topology.settings;
    this.#names = topology.names;
  }

  /**
   * An ordered group: its partition count recorded (or checked against the record), one partition
   * queue with a single active consumer per partition, each bound to its slots of every topic, and
   * the dead-letter queue. No back-fill from a topic's log: copies made while new messages arrive
   * would land behind later messages of their key. Returns the partition queues, and the queues of an
   * older generation still being drained, which the member consumes (to their fence) first.
   */
  async orderedGroup(
    group: string,
    topics: readonly string[],
    onPartitionChange: 'refuse' | 'drain' = 'refuse',
  ): Promise<OrderedPlan> {
    const count = this.#settings.partitions;
    for (const topic of topics) await this.#topology.topic(topic);
    const { topology } = this.#settings;
    const check = await checkPartitionCount(new RabbitPartitionCountStore(this.#topology, group, count), {
      group,
      count,
      ordering: { onPartitionChange },
      canDrain: topology !== 'check',
      canRecord: topology !== 'check',
      docs: 'docs/transports/rabbitmq.md, "Per-key ordering"',
    });
    if (check.change === 'drain') await this.#drainTo(group, topics, check.recorded, count);
    const queues = await this.#generation(group, count);
    await this.#topology.once(`ordered\n${queues.join('\n')}`, async (ch) => {
      for (const queue of queues) await this.#topology.queue(ch, queue, this.#partitionArguments());
      await this.#topology.queue(ch, this.#names.dead(group), this.#topology.durableArguments());
    });
    // Each partition queue's slots on a channel of its own, at once: 64 bindings one after another can
    // outlast a flaky connection's life, and bindings made before a cut are not made again.
    for (const topic of topics) {
      await Promise.all(
        queues.map((queue) =>
          this.#topology.once(`slots\n${queue}\n${topic}`, (ch) =>
            this.#bindSlots(ch, queues, topic, 'bind', queue),
          ),
        ),
      );
    }
    return { queues, draining: await this.#draining(group) };
  }

  /**
   * The partition queues of `count`: the generation a drain to `count` made, where it exists, else
   * the group's first generation.
   */
  async #generation(group: string, count: number): Promise<string[]> {
    const drained = await this.#topology.exists(this.#names.partition(group, 0, count));
    return Array.from({ length: count }, (_, index) =>
      this.#names.partition(group, index, drained ? count : undefined),
    );
  }

  /**
   * Moves the group from `from` partitions to `to`: the old generation's queues are listed in the
   * drain marker (so that every member finds them), a new generation is bound to the slots before
   * the old one is unbound (a message published in between is in both, and the ledger absorbs the
   * second copy), the marker records the new count, and a fence goes at the end of every old queue.
   * Every step is safe to repeat, so members racing to drain do no harm.
   */
  async #drainTo(group: string, topics: readonly string[], from: number, to: number): Promise<void> {
    const old = await this.#generation(group, from);
    const fresh = Array.from({ length: to }, (_, index) => this.#names.partition(group, index, to));
    const drainMarker = this.#names.drainMarker(group);
    this.#settings.logger.warn('oncemq: draining an ordered group to a new partition count', {
      group,
      from,
      to,
    });
    await this.#topology.probe(async (ch) => {
      await this.#topology.queue(ch, drainMarker, this.#topology.durableArguments());
      const { messageCount } = await ch.raw.checkQueue(drainMarker);
      const listed = Buffer.from(JSON.stringify({ queues: old }));
      if (messageCount === 0) await ch.publish('', drainMarker, listed, { messageId: `drain-${group}` });
    });
    await this.#topology.probe(async (ch) => {
      for (const queue of fresh) await this.#topology.queue(ch, queue, this.#partitionArguments());
      for (const topic of topics) await this.#bindSlots(ch, fresh, topic, 'bind');
    });
    for (const queue of old) {
      for (const topic of topics)
        await this.#topology.ifExists((ch) => this.#bindSlots(ch, old, topic, 'unbind', queue));
    }
    for (let attempt = 0; ; attempt++) {
      await this.#topology.probe((ch) => ch.raw.deleteQueue(this.#names.partitionMarker(group)));
      const recorded = await new RabbitPartitionCountStore(this.#topology, group, to).recordFirst(to);
      if (recorded === to) break;
      // A member restarted on the old count recorded it again in between: take it back.
      if (attempt >= 4)
        throw new TransportUnavailableError(`group '${group}': the partition marker keeps changing`);
    }
    for (const queue of old) {
      await this.#topology.ifExists((ch) =>
        ch.publish('', queue, Buffer.alloc(0), {
          messageId: `fence-${queue}`,
          headers: { [DRAIN_FENCE_HEADER]: 'true' },
        }),
      );
    }
  }

  /** The old generation's queues a drain left to empty (none when no drain runs). */
  async #draining(group: string): Promise<string[]> {
    const marker = this.#names.drainMarker(group);
    if (!(await this.#topology.exists(marker))) return [];
    this.#topology.declared.queues.add(marker);
    const listed = await this.#drainList(marker);
    if (listed === undefined) return [];
    const left: string[] = [];
    for (const queue of listed) if (await this.#topology.exists(queue)) left.push(queue);
    for (const queue of left) this.#topology.declared.queues.add(queue);
    if (left.length === 0) await this.drainDone(group);
    return left;
  }

  /**
   * The old queues a drain marker lists, or undefined once the marker is gone. The list is read with
   * `basic.get` and not acked (closing the channel puts it back), so while another member holds it
   * the marker answers empty: that is no answer, and the read is tried again. Taking an empty answer
   * for an empty list let a member end a drain another was still running, and consume the new
   * partitions before a key's old messages were settled.
   */
  async #drainList(marker: string): Promise<string[] | undefined> {
    const deadline = Date.now() + DRAIN_LIST_WAIT_MS;
    for (;;) {
      const listed = await this.#topology.ifExists(async (ch) => {
        const message = await ch.raw.get(marker, { noAck: false });
        return message === false
          ? null
          : (JSON.parse(message.content.toString()) as { queues: string[] }).queues;
      });
      if (listed !== null) return listed;
      if (Date.now() >= deadline)
        throw new TransportUnavailableError(
          `the drain marker '${marker}' kept answering empty for ${DRAIN_LIST_WAIT_MS} ms: its list of old queues is held by another member`,
        );
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 30));
    }
  }

  /**
   * Where a replayed dead letter of an ordered group goes: back to its partition queue while that
   * exists and no drain runs, else (a drain retires it) to its ordering key's partition in the
   * generation of this transport's `partitions`.
   */
  async replayQueue(group: string, original: string, orderingKey: string | undefined): Promise<string> {
    const draining = await this.#topology.exists(this.#names.drainMarker(group));
    if (!draining && (await this.#topology.exists(original))) return original;
    const queues = await this.#generation(group, this.#settings.partitions);
    return queues[partitionOf(orderingKey ?? original, RABBIT_SLOTS) % queues.length] as string;
  }

  /** Once every old queue is gone: the drain is over. */
  async drainDone(group: string): Promise<void> {
    await this.#topology.probe((ch) => ch.raw.deleteQueue(this.#names.drainMarker(group)));
  }

  /** Deletes an old generation's queue whose fence was reached. */
  async deleteDrained(queue: string): Promise<void> {
    await this.#topology.probe((ch) => ch.raw.deleteQueue(queue));
  }

  /** Forgets every step of an ordered group (its queues were deleted under it, or its count changed). */
  forgetOrdered(group: string): void {
    const prefix = `${this.#names.work(group)}@p`;
    this.#topology.forgetSteps(
      (kind, first) => (kind === 'ordered' || kind === 'slots') && first?.startsWith(prefix) === true,
    );
    this.forgetBindings((queue) => queue.startsWith(prefix));
  }

  /** Forgets the slot bindings made to the queues `of` matches (they were deleted under the transport). */
  forgetBindings(of: (queue: string) => boolean): void {
    for (const binding of [...this.#bound])
      if (of(binding.split('\n')[0] as string)) this.#bound.delete(binding);
  }

  /** Binds (or unbinds) slot `s` of `topic` to `queues[s mod length]`, or only those of queue `only`. */
  async #bindSlots(
    ch: RabbitChannel,
    queues: readonly string[],
    topic: string,
    how: 'bind' | 'unbind',
    only?: string,
  ): Promise<void> {
    if (this.#settings.topology !== 'create') return;
    for (let slot = 0; slot < RABBIT_SLOTS; slot++) {
      const queue = queues[slot % queues.length] as string;
      if (only !== undefined && queue !== only) continue;
      const key = slotKey(topic, slot);
      const binding = `${queue}\n${key}`;
      if (how === 'bind') {
        if (this.#bound.has(binding)) continue;
        await ch.raw.bindQueue(queue, this.#settings.exchange, key);
        this.#bound.add(binding);
      } else {
        await ch.raw.unbindQueue(queue, this.#settings.exchange, key);
        this.#bound.delete(binding);
      }
    }
  }

  #partitionArguments(): Record<string, unknown> {
    return { ...this.#topology.durableArguments(), 'x-single-active-consumer': true };
  }
}
