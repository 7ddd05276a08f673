import { tracePublish } from '../../telemetry/trace-publish.js';
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { ClosedError, ConfigError, TransportUnavailableError } from '../../core/errors.js';
import { configObject, OPTIONAL_CONFIG } from '../config-checks.js';
import type { Logger } from '../../core/logger.js';
import type { DeadLetter, DeadLetterQuery, DeadLetters } from '../dead-letters.js';
import {
  toProcessor,
  type OutgoingMessage,
  type ProcessorLike,
  type PublishReceipt,
  type Transport,
  type TransportCapabilities,
} from '../transport.js';
import { CHECK_MAX_TOPIC, retryTopic, validTopic } from './local-names.js';
import { resolveLocalBrokerConfig, type LocalBrokerConfig } from './local-config.js';
import { BrokerStore, type BrokerDatabaseLike, type StoredMessage } from './local-store.js';
import { DeadLetterStore } from './local-dead-letters.js';
import type { LocalFaultHooks } from './local-fault-hooks.js';
import type { ConsumerContext, ConsumerSettings } from './local-consumer.js';
import {
  DEFAULT_LOCAL_CONCURRENCY,
  LocalSubscription,
  subscriptionContext,
  type LocalSubscribeOptions,
} from './local-subscription.js';
import { checkSubscribe } from '../subscribe-options.js';
import type { TransactionProducerConfig } from '../half-message.js';
import { TransactionProducer } from './local-transaction-producer.js';
import { LocalPublisher } from './local-publisher.js';

/** The local broker's dead-letter queue: the contract's, and replayed dead letters on request. */
export interface LocalDeadLetters extends DeadLetters {
  list(query: DeadLetterQuery & { readonly includeReplayed?: boolean }): Promise<readonly DeadLetter[]>;
}

/**
 * The embedded broker: RocketMQ's delivery model in a SQLite file. Topics with queues, producer
 * confirms, consumer groups with rebalancing and committed offsets, a retry topic per group with
 * delays, a dead-letter table, and transactional (half) messages with check-back.
 */
export class LocalBroker implements Transport {
  readonly name = 'local';
  readonly capabilities: TransportCapabilities = Object.freeze({
    delay: true,
    deadLetter: true,
    ordering: true,
    brokerDedupWindowMs: 0,
    halfMessages: true,
    batch: true,
    keepAlive: true,
  });
  /** The broker's SQLite file (`:memory:` for a private one). */
  readonly path: string;
  /** The `host:port` written into broker ids. */
  readonly address: string;
  /** Queues of a topic this broker creates. */
  readonly queues: number;
  readonly #settings: ConsumerSettings;
  readonly #publisher: LocalPublisher;
  readonly #synchronous: 'normal' | 'full';
  readonly #busyTimeoutMs: number;
  readonly #faults: LocalFaultHooks | undefined;
  readonly #migrate: boolean;
  readonly #logger: Logger;
  readonly #membership = new EventEmitter();
  readonly #subscriptions = new Set<LocalSubscription>();
  readonly #producers = new Set<TransactionProducer>();
  readonly #queueCounts = new Map<string, number>();
  readonly #queuesConfigured: boolean;
  #store: BrokerStore | undefined;
  #deadLetters: DeadLetterStore | undefined;
  #opening: Promise<BrokerStore> | undefined;
  #closed = false;

  constructor(config: LocalBrokerConfig = {}) {
    const resolved = resolveLocalBrokerConfig(configObject(config, 'config', OPTIONAL_CONFIG));
    this.path = resolved.path;
    this.address = resolved.address;
    this.queues = resolved.queues;
    this.#queuesConfigured = resolved.queuesConfigured;
    this.#settings = resolved.settings;
    this.#synchronous = resolved.synchronous;
    this.#busyTimeoutMs = resolved.busyTimeoutMs;
    this.#faults = resolved.faults;
    this.#migrate = resolved.migrate;
    this.#logger = resolved.logger;
    this.#membership.setMaxListeners(0);
    this.#publisher = new LocalPublisher({
      open: () => this.#open(),
      store: () => this.store,
      brokerId: (offset) => this.brokerId(offset),
      queueCount: (topic) => this.queueCount(topic),
      selector: resolved.selector,
      sendAttempts: resolved.sendAttempts,
      faults: resolved.faults,
      logger: resolved.logger,
    });
  }

  /** Opens the file and runs migrations. Idempotent; the other methods call it. */
  async init(): Promise<void> {
    await this.#open();
  }

  #open(): Promise<BrokerStore> {
    if (this.#closed) return Promise.reject(new ClosedError('local broker'));
    if (this.#store !== undefined) return Promise.resolve(this.#store);
    this.#opening ??= this.#connect().catch((error: unknown) => {
      this.#opening = undefined;
      throw error;
    });
    return this.#opening;
  }

  async #connect(): Promise<BrokerStore> {
    type Open = new (path: string, options: { fileMustExist: boolean }) => BrokerDatabaseLike;
    let Database: Open;
    try {
      const module = (await import('better-sqlite3')) as unknown as { default: Open };
      Database = module.default;
    } catch (error) {
      throw new ConfigError(
        'path',
        'the local broker needs the better-sqlite3 package (npm install better-sqlite3@12)',
        {
          cause: error,
        },
      );
    }
    let db: BrokerDatabaseLike;
    try {
      if (this.path !== ':memory:' && this.#migrate) mkdirSync(dirname(this.path), { recursive: true });
      db = new Database(this.path, { fileMustExist: !this.#migrate });
      db.exec(`PRAGMA busy_timeout = ${Math.round(this.#busyTimeoutMs)}`);
      db.exec('PRAGMA journal_mode = WAL');
      db.exec(`PRAGMA synchronous = ${this.#synchronous.toUpperCase()}`);
    } catch (error) {
      throw new TransportUnavailableError(
        `cannot open the local broker at ${this.path}: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    const store = new BrokerStore(db, Date.now);
    try {
      if (this.#migrate) store.migrate();
      else store.checkSchema(this.path);
    } catch (error) {
      store.close();
      throw error;
    }
    this.#store = store;
    this.#deadLetters = new DeadLetterStore(
      store,
      (offset) => this.brokerId(offset),
      (topic) => this.queueCount(topic),
    );
    return store;
  }

  /** @internal the SQLite store, once open (the CLI and the tests read it) */
  get store(): BrokerStore {
    if (this.#store === undefined)
      throw new TransportUnavailableError('the local broker is not open; call init() first');
    return this.#store;
  }

  /** RocketMQ-style offset message id of a stored copy: `host:port-` and the commit-log offset in hex. */
  brokerId(commitOffset: number): string {
    return `${this.address}-${commitOffset.toString(16).toUpperCase().padStart(16, '0')}`;
  }

  /**
   * Queues of `topic`, creating the topic with {@link queues} queues on first use. Throws a
   * ConfigError when the topic was created with another count and this broker was configured with
   * `queues` explicitly.
   */
  queueCount(topic: string): number {
    let count = this.#queueCounts.get(topic);
    if (count === undefined) {
      const system = topic.startsWith('%RETRY%') || topic === CHECK_MAX_TOPIC;
      count = this.store.ensureTopic(topic, system ? 1 : this.queues);
      if (!system && this.#queuesConfigured && count !== this.queues) {
        throw new ConfigError(
          'queues',
          `topic '${topic}' has ${count} queues, fixed when it was created, and this broker is configured with ` +
            `${this.queues}: the local broker never changes a topic's queue count (ordering keys would move ` +
            `between queues while their earlier messages wait). Configure ${count}, or leave queues unset to ` +
            `take each topic's own count, or move to a new topic`,
        );
      }
      this.#queueCounts.set(topic, count);
    }
    return count;
  }

  /** Publishes inside a producer span whose trace context travels in the headers (docs/observability.md). */
  publish(message: OutgoingMessage): Promise<PublishReceipt> {
    return tracePublish(this.name, message, (traced) => this.#publisher.publish(traced));
  }

  async subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options: LocalSubscribeOptions = {},
  ): Promise<LocalSubscription> {
    const target = toProcessor(processor);
    // `batchSize` is the local broker's pull size, which may be larger than `concurrency`: read below.
    const checked = checkSubscribe(
      group,
      topics,
      target,
      { ...options, concurrency: options.concurrency ?? DEFAULT_LOCAL_CONCURRENCY, batchSize: undefined },
      { topic: validTopic },
    );
    // Unset, a new group starts where the broker's `consumeFrom` says.
    const from = options.from === undefined && this.#settings.consumeFrom === 'last' ? 'now' : checked.from;
    const store = await this.#open();
    const context = subscriptionContext(this.#context(store), options);
    for (const topic of [...topics, retryTopic(group)]) this.queueCount(topic);
    for (const topic of topics) store.startGroup(group, topic, this.queueCount(topic), from);
    const subscription = new LocalSubscription(context, group, [...topics], target, options);
    this.#subscriptions.add(subscription);
    subscription.onClose = () => this.#subscriptions.delete(subscription);
    subscription.start();
    return subscription;
  }

  #context(store: BrokerStore): ConsumerContext {
    return {
      store,
      deadLetters: this.#deadLetters as DeadLetterStore,
      settings: this.#settings,
      logger: this.#logger,
      faults: this.#faults,
      membership: this.#membership,
      brokerId: (offset) => this.brokerId(offset),
      queueCount: (topic) => this.queueCount(topic),
    };
  }

  /** A producer of transactional (half) messages with its check-back callback. */
  async createTransactionProducer(config: TransactionProducerConfig): Promise<TransactionProducer> {
    await this.#open();
    const producer = new TransactionProducer(this, this.#publisher, config, this.#logger);
    this.#producers.add(producer);
    producer.start();
    return producer;
  }

  /** Messages not yet consumed by `group` on `topics` (by committed offsets), its retry topic included, plus parked retries. */
  async lag(group: string, topics: readonly string[]): Promise<number> {
    const store = await this.#open();
    let lag = store.retries.count(group);
    for (const topic of [...topics, retryTopic(group)]) {
      const count = this.queueCount(topic);
      for (let queueId = 0; queueId < count; queueId++) {
        lag += store.maxOffset(topic, queueId) - (store.readOffset(group, topic, queueId) ?? 0);
      }
    }
    return lag;
  }

  /** Every stored copy of a topic, in commit order. */
  async messages(topic: string): Promise<StoredMessage[]> {
    return (await this.#open()).messages(topic);
  }

  /**
   * The dead-letter queue of every group; opens the broker on first use. A replay re-stores the
   * message in the group's retry topic (only that group receives it); replayed rows stay listed with
   * `includeReplayed`.
   */
  readonly deadLetters: LocalDeadLetters = Object.freeze({
    list: async (query: DeadLetterQuery & { readonly includeReplayed?: boolean }) =>
      (await this.#openDeadLetters()).list(query),
    replay: async (group: string, ids: readonly string[]) =>
      (await this.#openDeadLetters()).replay(group, ids),
    purge: async (group: string, ids: readonly string[]) => (await this.#openDeadLetters()).purge(group, ids),
    depth: async (group: string) => (await this.#openDeadLetters()).depth(group),
  });

  async #openDeadLetters(): Promise<DeadLetterStore> {
    await this.#open();
    return this.#deadLetters as DeadLetterStore;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.close()));
    for (const producer of this.#producers) producer.close();
    this.#closed = true;
    this.#store?.close();
    this.#store = undefined;
  }
}
