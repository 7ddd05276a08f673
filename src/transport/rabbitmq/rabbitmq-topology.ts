import { ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { UnconfirmedPublishError, type RabbitChannel } from './rabbitmq-channel.js';
import type { RabbitSettings } from './rabbitmq-config.js';
import type { RabbitConnection } from './rabbitmq-connection.js';
import type { RabbitNames } from './rabbitmq-names.js';
import { RabbitOrderedTopology } from './rabbitmq-ordered-topology.js';
import type { StartPosition } from '../transport.js';
import { backfillFromLog } from './rabbitmq-topic-backfill.js';

/** AMQP reply codes the topology tells apart. */
export const NOT_FOUND = 404;

/** The AMQP reply code of a declare whose arguments differ from the queue's. */
export const PRECONDITION_FAILED = 406;

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
  /** The transport's settings. */
  readonly settings: RabbitSettings;
  readonly #connection: RabbitConnection;
  readonly names: RabbitNames;
  /** An ordered group's partition queues, their slots and drains. */
  readonly ordered: RabbitOrderedTopology;
  readonly #done = new Map<string, Promise<void>>();
  /** Every queue and exchange this transport declared or checked (what a test removes after itself). */
  readonly declared = { queues: new Set<string>(), exchanges: new Set<string>() };

  constructor(settings: RabbitSettings, connection: RabbitConnection, names: RabbitNames) {
    this.settings = settings;
    this.#connection = connection;
    this.names = names;
    this.ordered = new RabbitOrderedTopology(this);
  }

  /** The queue type used: quorum where the server has it (3.8+), unless configured. */
  get quorum(): boolean {
    const chosen = this.settings.queueType;
    return chosen === 'quorum' || (chosen === 'auto' && atLeast(this.#connection.serverVersion, 3, 8));
  }

  /**
   * Forgets the steps done for queue `name` (a queue deleted under the transport), so that the next
   * use declares (or checks) it again, with its bindings.
   */
  forget(name: string): void {
    for (const step of [...this.#done.keys()]) if (step.split('\n')[1] === name) this.#done.delete(step);
    this.ordered.forgetBindings((queue) => queue === name);
  }

  /** Forgets the steps done whose kind and first name `match` says, so that they run again. */
  forgetSteps(match: (kind: string, first: string | undefined) => boolean): void {
    for (const step of [...this.#done.keys()]) {
      const [kind, first] = step.split('\n');
      if (match(kind as string, first)) this.#done.delete(step);
    }
  }

  /** The exchange, and for a topic its log and the log's binding (publish and subscribe call it). */
  topic(topic: string): Promise<void> {
    return this.once(`topic\n${topic}`, async (ch) => {
      const { exchange, retentionMs } = this.settings;
      await this.#exchange(ch, exchange, 'direct');
      if (retentionMs === false) return;
      if (!atLeast(this.#connection.serverVersion, 3, 9)) {
        throw new ConfigError(
          'retention',
          `RabbitMQ ${this.#connection.serverVersion ?? '?'} has no streams for topic logs; set retention: false`,
        );
      }
      const log = this.names.log(topic);
      await this.queue(ch, log, {
        'x-queue-type': 'stream',
        'x-max-age': `${Math.ceil(retentionMs / 1000)}s`,
      });
      if (this.settings.topology === 'create') await ch.raw.bindQueue(log, exchange, topic);
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
    await this.once(`group\n${work}`, async (ch) => {
      await this.queue(ch, work, this.durableArguments());
      await this.queue(ch, this.names.dead(group), this.durableArguments());
    });
    for (const topic of topics) {
      await this.once(`bind\n${work}\n${topic}`, async (ch) => {
        if (this.settings.topology === 'create') await ch.raw.bindQueue(work, this.settings.exchange, topic);
      });
      if (this.settings.retentionMs !== false && this.settings.topology === 'create') {
        await this.once(`ready\n${work}\n${topic}`, () => this.#backfill(group, topic, from));
      }
    }
  }

  /** Whether queue `name` exists. */
  async exists(name: string): Promise<boolean> {
    return (await this.ifExists((ch) => ch.raw.checkQueue(name))) !== undefined;
  }

  /** @internal Runs `step` on a channel of its own; a queue not found answers `undefined`. */
  async ifExists<T>(step: (ch: RabbitChannel) => Promise<T>): Promise<T | undefined> {
    try {
      return await this.probe(step);
    } catch (error) {
      if (replyCode(error) === NOT_FOUND) return undefined;
      if (error instanceof UnconfirmedPublishError && error.reason === 'unroutable') return undefined;
      throw error;
    }
  }

  /** The retry queue of one delay level: its TTL is the level, its expired messages go to the work queue. */
  retryQueue(group: string, levelMs: number): Promise<string> {
    const queue = this.names.retry(group, levelMs);
    return this.once(`retry\n${queue}`, async (ch) => {
      await this.queue(ch, queue, {
        ...this.durableArguments(),
        'x-message-ttl': levelMs,
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': this.names.work(group),
        // At-least-once dead-lettering: the expired copy leaves only once the work queue has it.
        ...(this.quorum ? { 'x-dead-letter-strategy': 'at-least-once', 'x-overflow': 'reject-publish' } : {}),
      });
    }).then(() => queue);
  }

  /** The group's dead-letter queue, checked (it must exist even in `create` mode for the tools). */
  async deadQueue(group: string, create = this.settings.topology === 'create'): Promise<string> {
    const queue = this.names.dead(group);
    await this.once(`dead\n${queue}\n${create}`, async (ch) => {
      if (create) await this.queue(ch, queue, this.durableArguments());
      else await this.check(ch, queue);
    });
    return queue;
  }

  /** @internal The arguments of a durable queue of the configured type. */
  durableArguments(): Record<string, unknown> {
    return this.quorum ? { 'x-queue-type': 'quorum' } : {};
  }

  /**
   * Marks that the group's queue started on `topic`, after copying the topic's log into it when it
   * starts from `earliest`. A group already marked is left as it is, whatever `from` says.
   */
  async #backfill(group: string, topic: string, from: StartPosition): Promise<void> {
    const marker = this.names.ready(group, topic);
    const seen = await this.probe(async (ch) => {
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
      await this.probe((ch) => this.#exchange(ch, marker, 'fanout'));
      return;
    }
    const copied = await backfillFromLog(this.#connection, this.settings, {
      log: this.names.log(topic),
      queue: this.names.work(group),
    });
    this.settings.logger.info('oncemq: a new group got its topic’s log', { group, topic, copied });
    await this.probe((ch) => this.#exchange(ch, marker, 'fanout'));
  }

  async #exchange(ch: RabbitChannel, exchange: string, type: string): Promise<void> {
    this.declared.exchanges.add(exchange);
    if (this.settings.topology === 'check') {
      await this.#found(() => ch.raw.checkExchange(exchange), `exchange '${exchange}'`);
    } else await ch.raw.assertExchange(exchange, type, { durable: true });
  }

  /** @internal Declares `queue` with `args` (topology `create`) or checks that it exists (`check`). */
  async queue(ch: RabbitChannel, queue: string, args: Record<string, unknown>): Promise<void> {
    this.declared.queues.add(queue);
    if (this.settings.topology === 'check') return this.check(ch, queue);
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

  /** @internal Checks that `queue` exists: a `ConfigError` naming it when not. */
  async check(ch: RabbitChannel, queue: string): Promise<void> {
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

  /** @internal Runs `step` once (again after a failure) on a channel of its own. */
  once(id: string, step: (ch: RabbitChannel) => Promise<void>): Promise<void> {
    let done = this.#done.get(id);
    if (done === undefined) {
      done = this.probe(step);
      this.#done.set(id, done);
      done.catch(() => this.#done.delete(id));
    }
    return done;
  }

  /** @internal Runs `step` on a short-lived channel of its own; a driver failure is a `TransportUnavailableError`. */
  async probe<T>(step: (ch: RabbitChannel) => Promise<T>): Promise<T> {
    const ch = await this.#connection.channel('topology', this.settings.publishTimeoutMs, true);
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
