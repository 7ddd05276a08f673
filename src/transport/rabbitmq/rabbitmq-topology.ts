import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { UnconfirmedPublishError, type RabbitChannel } from './rabbitmq-channel.js';
import type { RabbitSettings } from './rabbitmq-config.js';
import type { RabbitConnection } from './rabbitmq-connection.js';
import { RABBIT_SLOTS, slotKey, type RabbitNames } from './rabbitmq-names.js';
import type { StartPosition } from '../transport.js';
import { backfillFromLog } from './rabbitmq-topic-backfill.js';
import { partitionOf } from '../partitions.js';

/** How long a member waits for a drain marker's list while other members read it. */
const DRAIN_LIST_WAIT_MS = 10_000;

/** AMQP reply codes the topology tells apart. */
export const NOT_FOUND = 404;

/** The header of the message a drain puts at the end of an old partition queue. */
export const DRAIN_FENCE_HEADER = 'oncemq-drain-fence';

/** What an ordered member consumes: its partition queues, after the old ones still being drained. */
export interface OrderedPlan {
  readonly queues: readonly string[];
  readonly draining: readonly string[];
}
const PRECONDITION_FAILED = 406;

/** The AMQP reply code of a broker's refusal: on the driver's error, or on the cause of oncemq's. */
export function replyCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'number') return code;
  const cause = (error as { cause?: unknown } | null)?.cause;
  const causeCode = (cause as { code?: unknown } | null)?.code;
  return typeof causeCode === 'number' ? causeCode : undefined;
}

/** `3.10.8` → [3, 10]; unknown versions count as new. */
function atLeast(version: string | undefined, major: number, minor: number): boolean {
  const match = /^(\d+)\.(\d+)/.exec(version ?? '');
  if (match === null) return true;
  const [have, haveMinor] = [Number(match[1]), Number(match[2])];
  return have > major || (have === major && haveMinor >= minor);
}

/**
 * Declares (topology `create`) or checks (`check`) what the transport needs. Every step runs on a
 * short-lived channel of its own, since RabbitMQ closes the channel of a failed declare (a queue
 * missing, or there with other arguments), and what succeeded is remembered so that it runs once.
 */
export class RabbitTopology {
  readonly #settings: RabbitSettings;
  readonly #connection: RabbitConnection;
  readonly names: RabbitNames;
  readonly #done = new Map<string, Promise<void>>();
  /** Slot bindings made (`queue\nrouting key`): a step cut halfway does not make them again. */
  readonly #bound = new Set<string>();
  /** Every queue and exchange this transport declared or checked (what a test removes after itself). */
  readonly declared = { queues: new Set<string>(), exchanges: new Set<string>() };

  constructor(settings: RabbitSettings, connection: RabbitConnection, names: RabbitNames) {
    this.#settings = settings;
    this.#connection = connection;
    this.names = names;
  }

  /** The queue type used: quorum where the server has it (3.8+), unless configured. */
  get quorum(): boolean {
    const chosen = this.#settings.queueType;
    return chosen === 'quorum' || (chosen === 'auto' && atLeast(this.#connection.serverVersion, 3, 8));
  }

  /**
   * Forgets the steps done for queue `name` (a queue deleted under the transport), so that the next
   * use declares (or checks) it again, with its bindings.
   */
  forget(name: string): void {
    for (const step of [...this.#done.keys()]) if (step.split('\n')[1] === name) this.#done.delete(step);
    this.#forgetBindings((queue) => queue === name);
  }

  #forgetBindings(of: (queue: string) => boolean): void {
    for (const binding of [...this.#bound])
      if (of(binding.split('\n')[0] as string)) this.#bound.delete(binding);
  }

  /** The exchange, and for a topic its log and the log's binding (publish and subscribe call it). */
  topic(topic: string): Promise<void> {
    return this.#once(`topic\n${topic}`, async (ch) => {
      const { exchange, retentionMs } = this.#settings;
      await this.#exchange(ch, exchange, 'direct');
      if (retentionMs === false) return;
      if (!atLeast(this.#connection.serverVersion, 3, 9)) {
        throw new ConfigError(
          'retention',
          `RabbitMQ ${this.#connection.serverVersion ?? '?'} has no streams for topic logs; set retention: false`,
        );
      }
      const log = this.names.log(topic);
      await this.#queue(ch, log, {
        'x-queue-type': 'stream',
        'x-max-age': `${Math.ceil(retentionMs / 1000)}s`,
      });
      if (this.#settings.topology === 'create') await ch.raw.bindQueue(log, exchange, topic);
    });
  }

  /**
   * A group's work queue bound to each topic, and its dead-letter queue. A queue that has not started
   * on a topic yet does now (a marker exchange records that it did): from `earliest`, it gets the
   * topic's log first, so a new group starts with what the topic kept; from `now`, it gets nothing
   * from before its binding.
   */
  async group(group: string, topics: readonly string[], from: StartPosition): Promise<void> {
    const work = this.names.work(group);
    for (const topic of topics) await this.topic(topic);
    await this.#once(`group\n${work}`, async (ch) => {
      await this.#queue(ch, work, this.#durableArguments());
      await this.#queue(ch, this.names.dead(group), this.#durableArguments());
    });
    for (const topic of topics) {
      await this.#once(`bind\n${work}\n${topic}`, async (ch) => {
        if (this.#settings.topology === 'create')
          await ch.raw.bindQueue(work, this.#settings.exchange, topic);
      });
      if (this.#settings.retentionMs !== false && this.#settings.topology === 'create') {
        await this.#once(`ready\n${work}\n${topic}`, () => this.#backfill(group, topic, from));
      }
    }
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
    for (const topic of topics) await this.topic(topic);
    const marker = this.names.partitionMarker(group);
    const recorded = await this.#probe((ch) => this.#partitionCount(ch, group, count));
    if (recorded !== count) {
      if (onPartitionChange === 'refuse' || this.#settings.topology === 'check') {
        throw new ConfigError(
          'partitions',
          `group '${group}' is ordered over ${recorded} partitions (recorded in queue '${marker}'), and this ` +
            `transport is configured with ${count}: a new count would move ordering keys between partitions. ` +
            (onPartitionChange === 'refuse'
              ? `Subscribe with ordering: { onPartitionChange: 'drain' } to move the group over, or keep ${recorded}`
              : `A drain declares queues: it needs topology 'create'`),
        );
      }
      await this.#drainTo(group, topics, recorded, count);
    }
    const queues = await this.#generation(group, count);
    await this.#once(`ordered\n${queues.join('\n')}`, async (ch) => {
      for (const queue of queues) await this.#queue(ch, queue, this.#partitionArguments());
      await this.#queue(ch, this.names.dead(group), this.#durableArguments());
    });
    // Each partition queue's slots on a channel of its own, at once: 64 bindings one after another can
    // outlast a flaky connection's life, and bindings made before a cut are not made again.
    for (const topic of topics) {
      await Promise.all(
        queues.map((queue) =>
          this.#once(`slots\n${queue}\n${topic}`, (ch) => this.#bindSlots(ch, queues, topic, 'bind', queue)),
        ),
      );
    }
    return { queues, draining: await this.#draining(group) };
  }

  /**
   * Reads the recorded partition count from the marker queue's `x-max-length`, recording `count`
   * when there is none yet. RabbitMQ compares the argument on every later declare, so another count
   * is answered with the recorded one. With topology `check` the marker must exist already.
   */
  async #partitionCount(ch: RabbitChannel, group: string, count: number): Promise<number> {
    const marker = this.names.partitionMarker(group);
    this.declared.queues.add(marker);
    if (this.#settings.topology === 'check') await this.#check(ch, marker);
    try {
      await ch.raw.assertQueue(marker, { durable: true, arguments: { 'x-max-length': count } });
      return count;
    } catch (error) {
      const recorded = /current (?:value )?is '(\d+)'/.exec(errorText(error))?.[1];
      if (replyCode(error) !== PRECONDITION_FAILED || recorded === undefined) throw error;
      return Number(recorded);
    }
  }

  /**
   * The partition queues of `count`: the generation a drain to `count` made, where it exists, else
   * the group's first generation.
   */
  async #generation(group: string, count: number): Promise<string[]> {
    const drained = await this.exists(this.names.partition(group, 0, count));
    return Array.from({ length: count }, (_, index) =>
      this.names.partition(group, index, drained ? count : undefined),
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
    const fresh = Array.from({ length: to }, (_, index) => this.names.partition(group, index, to));
    const drainMarker = this.names.drainMarker(group);
    this.#settings.logger.warn('oncemq: draining an ordered group to a new partition count', {
      group,
      from,
      to,
    });
    await this.#probe(async (ch) => {
      await this.#queue(ch, drainMarker, this.#durableArguments());
      const { messageCount } = await ch.raw.checkQueue(drainMarker);
      const listed = Buffer.from(JSON.stringify({ queues: old }));
      if (messageCount === 0) await ch.publish('', drainMarker, listed, { messageId: `drain-${group}` });
    });
    await this.#probe(async (ch) => {
      for (const queue of fresh) await this.#queue(ch, queue, this.#partitionArguments());
      for (const topic of topics) await this.#bindSlots(ch, fresh, topic, 'bind');
    });
    for (const queue of old) {
      for (const topic of topics)
        await this.#ifExists((ch) => this.#bindSlots(ch, old, topic, 'unbind', queue));
    }
    for (let attempt = 0; ; attempt++) {
      await this.#probe((ch) => ch.raw.deleteQueue(this.names.partitionMarker(group)));
      const recorded = await this.#probe((ch) => this.#partitionCount(ch, group, to));
      if (recorded === to) break;
      // A member restarted on the old count recorded it again in between: take it back.
      if (attempt >= 4)
        throw new TransportUnavailableError(`group '${group}': the partition marker keeps changing`);
    }
    for (const queue of old) {
      await this.#ifExists((ch) =>
        ch.publish('', queue, Buffer.alloc(0), {
          messageId: `fence-${queue}`,
          headers: { [DRAIN_FENCE_HEADER]: 'true' },
        }),
      );
    }
  }

  /** The old generation's queues a drain left to empty (none when no drain runs). */
  async #draining(group: string): Promise<string[]> {
    const marker = this.names.drainMarker(group);
    if (!(await this.exists(marker))) return [];
    this.declared.queues.add(marker);
    const listed = await this.#drainList(marker);
    if (listed === undefined) return [];
    const left: string[] = [];
    for (const queue of listed) if (await this.exists(queue)) left.push(queue);
    for (const queue of left) this.declared.queues.add(queue);
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
      const listed = await this.#ifExists(async (ch) => {
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
    const draining = await this.exists(this.names.drainMarker(group));
    if (!draining && (await this.exists(original))) return original;
    const queues = await this.#generation(group, this.#settings.partitions);
    return queues[partitionOf(orderingKey ?? original, RABBIT_SLOTS) % queues.length] as string;
  }

  /** Once every old queue is gone: the drain is over. */
  async drainDone(group: string): Promise<void> {
    await this.#probe((ch) => ch.raw.deleteQueue(this.names.drainMarker(group)));
  }

  /** Deletes an old generation's queue whose fence was reached. */
  async deleteDrained(queue: string): Promise<void> {
    await this.#probe((ch) => ch.raw.deleteQueue(queue));
  }

  /** Whether queue `name` exists. */
  async exists(name: string): Promise<boolean> {
    return (await this.#ifExists((ch) => ch.raw.checkQueue(name))) !== undefined;
  }

  /** Forgets every step of an ordered group (its queues were deleted under it, or its count changed). */
  forgetOrdered(group: string): void {
    const prefix = `${this.names.work(group)}@p`;
    for (const step of [...this.#done.keys()]) {
      const [kind, first] = step.split('\n');
      if ((kind === 'ordered' || kind === 'slots') && first?.startsWith(prefix) === true)
        this.#done.delete(step);
    }
    this.#forgetBindings((queue) => queue.startsWith(prefix));
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

  /** Runs `step` on a channel of its own; a queue not found answers `undefined`. */
  async #ifExists<T>(step: (ch: RabbitChannel) => Promise<T>): Promise<T | undefined> {
    try {
      return await this.#probe(step);
    } catch (error) {
      if (replyCode(error) === NOT_FOUND) return undefined;
      if (error instanceof UnconfirmedPublishError && error.reason === 'unroutable') return undefined;
      throw error;
    }
  }

  #partitionArguments(): Record<string, unknown> {
    return { ...this.#durableArguments(), 'x-single-active-consumer': true };
  }

  /** The retry queue of one delay level: its TTL is the level, its expired messages go to the work queue. */
  retryQueue(group: string, levelMs: number): Promise<string> {
    const queue = this.names.retry(group, levelMs);
    return this.#once(`retry\n${queue}`, async (ch) => {
      await this.#queue(ch, queue, {
        ...this.#durableArguments(),
        'x-message-ttl': levelMs,
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': this.names.work(group),
        // At-least-once dead-lettering: the expired copy leaves only once the work queue has it.
        ...(this.quorum ? { 'x-dead-letter-strategy': 'at-least-once', 'x-overflow': 'reject-publish' } : {}),
      });
    }).then(() => queue);
  }

  /** The group's dead-letter queue, checked (it must exist even in `create` mode for the tools). */
  async deadQueue(group: string, create = this.#settings.topology === 'create'): Promise<string> {
    const queue = this.names.dead(group);
    await this.#once(`dead\n${queue}\n${create}`, async (ch) => {
      if (create) await this.#queue(ch, queue, this.#durableArguments());
      else await this.#check(ch, queue);
    });
    return queue;
  }

  #durableArguments(): Record<string, unknown> {
    return this.quorum ? { 'x-queue-type': 'quorum' } : {};
  }

  /**
   * Marks that the group's queue started on `topic`, after copying the topic's log into it when it
   * starts from `earliest`. A group already marked is left as it is, whatever `from` says.
   */
  async #backfill(group: string, topic: string, from: StartPosition): Promise<void> {
    const marker = this.names.ready(group, topic);
    const seen = await this.#probe(async (ch) => {
      try {
        await ch.raw.checkExchange(marker);
        return true;
      } catch (error) {
        if (replyCode(error) === NOT_FOUND) return false;
        throw error;
      }
    });
    this.declared.exchanges.add(marker);
    if (seen) return;
    if (from === 'now') {
      // Everything published from now on reaches the queue through its binding (made before this).
      await this.#probe((ch) => this.#exchange(ch, marker, 'fanout'));
      return;
    }
    const copied = await backfillFromLog(this.#connection, this.#settings, {
      log: this.names.log(topic),
      queue: this.names.work(group),
    });
    this.#settings.logger.info('oncemq: a new group got its topic’s log', { group, topic, copied });
    await this.#probe((ch) => this.#exchange(ch, marker, 'fanout'));
  }

  async #exchange(ch: RabbitChannel, exchange: string, type: string): Promise<void> {
    this.declared.exchanges.add(exchange);
    if (this.#settings.topology === 'check') {
      await this.#found(() => ch.raw.checkExchange(exchange), `exchange '${exchange}'`);
    } else await ch.raw.assertExchange(exchange, type, { durable: true });
  }

  async #queue(ch: RabbitChannel, queue: string, args: Record<string, unknown>): Promise<void> {
    this.declared.queues.add(queue);
    if (this.#settings.topology === 'check') return this.#check(ch, queue);
    try {
      await ch.raw.assertQueue(queue, { durable: true, arguments: args });
    } catch (error) {
      if (replyCode(error) !== PRECONDITION_FAILED) throw error;
      throw new ConfigError(
        'topology',
        `queue '${queue}' exists with other arguments than ${JSON.stringify(args)}: ${errorText(error)}`,
        { cause: error },
      );
    }
  }

  async #check(ch: RabbitChannel, queue: string): Promise<void> {
    this.declared.queues.add(queue);
    await this.#found(() => ch.raw.checkQueue(queue), `queue '${queue}'`);
  }

  async #found(check: () => Promise<unknown>, what: string): Promise<void> {
    try {
      await check();
    } catch (error) {
      if (replyCode(error) !== NOT_FOUND) throw error;
      throw new ConfigError(
        'topology',
        `${what} does not exist on the broker (topology 'check' creates nothing)`,
        { cause: error },
      );
    }
  }

  /** Runs `step` once (again after a failure) on a channel of its own. */
  #once(id: string, step: (ch: RabbitChannel) => Promise<void>): Promise<void> {
    let done = this.#done.get(id);
    if (done === undefined) {
      done = this.#probe(step);
      this.#done.set(id, done);
      done.catch(() => this.#done.delete(id));
    }
    return done;
  }

  async #probe<T>(step: (ch: RabbitChannel) => Promise<T>): Promise<T> {
    const ch = await this.#connection.channel('topology', this.#settings.publishTimeoutMs, true);
    try {
      return await step(ch);
    } catch (error) {
      if (error instanceof ConfigError || error instanceof TransportUnavailableError) throw error;
      throw new TransportUnavailableError(`RabbitMQ topology failed: ${errorText(error)}`, { cause: error });
    } finally {
      await ch.close();
    }
  }
}
