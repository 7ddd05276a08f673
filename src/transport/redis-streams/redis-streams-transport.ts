import { tracePublish } from '../../telemetry/trace-publish.js';
import { ConfigError, TransportClosedError } from '../../core/errors.js';
import { configObject } from '../config-checks.js';
import type { DeadLetters } from '../dead-letters.js';
import {
  toProcessor,
  type OutgoingMessage,
  type ProcessorLike,
  type PublishReceipt,
  type Transport,
  type TransportCapabilities,
} from '../transport.js';
import { checkSubscribe } from '../subscribe-options.js';
import {
  ORDERED_NO_EARLIEST,
  resolveStreamSettings,
  resolveSubscribeSettings,
  type RedisStreamsSubscribeOptions,
  type RedisStreamsTransportConfig,
  type StreamSettings,
} from './redis-streams-config.js';
import { StreamCommands } from './redis-streams-commands.js';
import type { StreamConnection } from './redis-streams-connection.js';
import { openStreamConnection, toStreamConnection } from './redis-streams-driver.js';
import { StreamDeadLetters } from './redis-streams-dead-letters.js';
import { TOPIC_FIELD } from './redis-streams-entry.js';
import { validTopic } from './redis-streams-names.js';
import { StreamOrderedSubscription } from './redis-streams-ordered-subscription.js';
import { StreamPublisher } from './redis-streams-publisher.js';
import { StreamSubscription } from './redis-streams-subscription.js';
import { checkDeliveryCount, checkNamedTopic, guardHeaders } from '../header-guard.js';

/**
 * Redis Streams as an oncemq transport (Redis 6.2+; node-redis or ioredis). A topic is a stream, a
 * consumer group a Redis consumer group on each of its topics' streams and on its own retry stream;
 * delayed retries wait in a sorted set and move back by a script; dead letters are a stream per
 * group. See docs/transports/redis-streams.md.
 */
export class RedisStreamsTransport implements Transport {
  readonly name = 'redis-streams';
  readonly capabilities: TransportCapabilities = Object.freeze({
    delay: true,
    deadLetter: true,
    ordering: true,
    brokerDedupWindowMs: 0,
    halfMessages: false,
    batch: true,
    keepAlive: true,
  });
  /** The configuration, checked, with its defaults, durations in milliseconds. */
  readonly settings: StreamSettings;
  /** The groups' dead-letter streams: list, replay to the group only, purge. */
  readonly deadLetters: DeadLetters;
  readonly #connection: StreamConnection;
  readonly #commands: StreamCommands;
  readonly #publisher: StreamPublisher;
  readonly #subscriptions = new Set<StreamSubscription | StreamOrderedSubscription>();
  /** `group` NUL `consumer` of every open subscription. */
  readonly #members = new Set<string>();
  #owned = false;
  #closed = false;

  constructor(config: RedisStreamsTransportConfig) {
    configObject(config, 'client', 'pass { client } with a node-redis or ioredis client');
    this.settings = resolveStreamSettings(config);
    this.#connection = toStreamConnection(config.client);
    this.#commands = new StreamCommands(this.#connection, this.settings.timeoutMs);
    this.deadLetters = new StreamDeadLetters(() => this.#open(), this.settings.keys);
    this.#publisher = new StreamPublisher(() => this.#open(), this.settings);
  }

  /**
   * Connects a client of its own to `url` (node-redis when installed, else ioredis) and closes it
   * with the transport.
   */
  static async connect(
    url: string,
    config: Omit<RedisStreamsTransportConfig, 'client'> = {},
  ): Promise<RedisStreamsTransport> {
    const connection = await openStreamConnection(url);
    let transport: RedisStreamsTransport;
    try {
      transport = new RedisStreamsTransport({ ...config, client: connection });
    } catch (error) {
      await connection.close();
      throw error;
    }
    transport.#owned = true;
    return transport;
  }

  #open(): StreamCommands {
    if (this.#closed) throw new TransportClosedError('the redis-streams transport is closed');
    return this.#commands;
  }

  /**
   * Stores the message in its topic's stream (and, while the topic has ordered groups, in its key's
   * shard stream) and resolves with Redis's reply, inside a producer span whose trace context travels
   * in the headers (docs/observability.md). A publish whose connection broke before the reply is sent
   * again (a new copy with the same key) up to `publishAttempts` times; one that timed out is not.
   */
  publish(message: OutgoingMessage): Promise<PublishReceipt> {
    return tracePublish(this.name, message, (traced) => this.#publisher.publish(traced));
  }

  /**
   * Joins `group` on `topics` as one member (a Redis consumer of its own name) and drives `processor`
   * with every delivery. See {@link RedisStreamsSubscribeOptions} for how the options map.
   */
  async subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options: RedisStreamsSubscribeOptions = {},
  ): Promise<StreamSubscription | StreamOrderedSubscription> {
    this.#open();
    const own = toProcessor(processor);
    const checked = checkSubscribe(group, topics, own, options, {
      topic: (topic) => void validTopic(topic),
      ...(options.ordering === undefined ? {} : { noEarliest: ORDERED_NO_EARLIEST }),
    });
    const unique = [...new Set(checked.topics)];
    // A copy names its topic in a retry stream's field: it must be one of the group's topics.
    const target = guardHeaders(
      own,
      group,
      (envelope) =>
        checkDeliveryCount(envelope.headers) ?? checkNamedTopic(TOPIC_FIELD, envelope.topic, unique),
      this.settings.logger,
    );
    const member = resolveSubscribeSettings(options, checked);
    const name = `${group}\u0000${member.consumerName}`;
    if (this.#members.has(name)) {
      throw new ConfigError(
        'consumerName',
        `'${member.consumerName}' is a member of group '${group}' already; give each member a name of its own`,
      );
    }
    this.#members.add(name);
    const opened: StreamConnection[] = [];
    try {
      opened.push(await this.#connection.duplicate(), await this.#connection.duplicate());
      const [reader, commands] = opened as [StreamConnection, StreamConnection];
      const shape = options.ordering === undefined ? StreamSubscription : StreamOrderedSubscription;
      const subscription = new shape({
        group,
        topics: unique,
        processor: target,
        settings: this.settings,
        options: member,
        reader: new StreamCommands(reader, this.settings.timeoutMs),
        commands: new StreamCommands(commands, this.settings.timeoutMs),
        ...(options.ordering === undefined ? {} : { ordering: options.ordering }),
        onClosed: () => {
          this.#subscriptions.delete(subscription);
          this.#members.delete(name);
        },
      });
      await subscription.start();
      this.#subscriptions.add(subscription);
      return subscription;
    } catch (error) {
      this.#members.delete(name);
      await Promise.all(opened.map((connection) => connection.close()));
      throw error;
    }
  }

  /** Closes every subscription (each drains and settles its deliveries), then a client it connected itself. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.close()));
    if (this.#owned) await this.#connection.close();
  }
}
