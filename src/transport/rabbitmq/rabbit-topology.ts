import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import type { RabbitChannel } from './rabbit-channel.js';
import type { RabbitSettings } from './rabbit-config.js';
import type { RabbitConnection } from './rabbit-connection.js';
import { RABBIT_SLOTS, slotKey, type RabbitNames } from './rabbit-names.js';
import { backfillFromLog } from './topic-backfill.js';

/** AMQP reply codes the topology tells apart. */
const NOT_FOUND = 404;
const PRECONDITION_FAILED = 406;

function replyCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
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
   * A group's work queue bound to each topic, and its dead-letter queue. A queue that has not had a
   * topic's log yet gets it now (a marker exchange records that it did), so a new group starts with
   * what the topic kept.
   */
  async group(group: string, topics: readonly string[]): Promise<void> {
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
        await this.#once(`ready\n${work}\n${topic}`, () => this.#backfill(group, topic));
      }
    }
  }

  /**
   * An ordered group: its partition count recorded (or checked against the record), one partition
   * queue with a single active consumer per partition, each bound to its slots of every topic, and
   * the dead-letter queue. No back-fill from a topic's log: copies made while new messages arrive
   * would land behind later messages of their key. Returns the partition queues.
   */
  async orderedGroup(group: string, topics: readonly string[]): Promise<readonly string[]> {
    const count = this.#settings.partitions;
    for (const topic of topics) await this.topic(topic);
    await this.#once(`partitions\n${this.names.partitionMarker(group)}`, (ch) =>
      this.#partitionCount(ch, group, count),
    );
    const queues = Array.from({ length: count }, (_, index) => this.names.partition(group, index));
    await this.#once(`ordered\n${this.names.work(group)}`, async (ch) => {
      for (const queue of queues) {
        await this.#queue(ch, queue, { ...this.#durableArguments(), 'x-single-active-consumer': true });
      }
      await this.#queue(ch, this.names.dead(group), this.#durableArguments());
    });
    for (const topic of topics) {
      await this.#once(`slots\n${this.names.work(group)}\n${topic}`, async (ch) => {
        if (this.#settings.topology !== 'create') return;
        for (let slot = 0; slot < RABBIT_SLOTS; slot++) {
          await ch.raw.bindQueue(
            queues[slot % count] as string,
            this.#settings.exchange,
            slotKey(topic, slot),
          );
        }
      });
    }
    return queues;
  }

  /**
   * Records the partition count in the marker queue's `x-max-length`, which RabbitMQ compares on
   * every later declare: another count is refused (it would move keys between partitions while
   * their messages wait in the old ones). With topology `check` the marker must exist already.
   */
  async #partitionCount(ch: RabbitChannel, group: string, count: number): Promise<void> {
    const marker = this.names.partitionMarker(group);
    this.declared.queues.add(marker);
    if (this.#settings.topology === 'check') await this.#check(ch, marker);
    try {
      await ch.raw.assertQueue(marker, { durable: true, arguments: { 'x-max-length': count } });
    } catch (error) {
      if (replyCode(error) !== PRECONDITION_FAILED) throw error;
      const recorded = /current (?:value )?is '(\d+)'/.exec(errorText(error))?.[1] ?? 'another number of';
      throw new ConfigError(
        'partitions',
        `group '${group}' is ordered over ${recorded} partitions (recorded in queue '${marker}'), and this ` +
          `transport is configured with ${count}: a new count would move ordering keys between partitions. ` +
          `To change it, stop every member of the group, let its partition queues drain, delete them and the ` +
          `marker queue, then start the members with the new count`,
        { cause: error },
      );
    }
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

  async #backfill(group: string, topic: string): Promise<void> {
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
