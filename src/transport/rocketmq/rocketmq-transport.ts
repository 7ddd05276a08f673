import { tracePublish } from '../../telemetry/trace-publish.js';
import { randomUUID } from 'node:crypto';
import { parseDuration } from '../../core/duration.js';
import { encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { ClosedError, ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { configObject, OPTIONAL_CONFIG } from '../config-checks.js';
import { unreachableCause, unreachableMessage } from '../../core/unreachable.js';
import { checkSubscribe } from '../subscribe-options.js';
import {
  DEFAULT_SUBSCRIBE_OPTIONS,
  toProcessor,
  type OutgoingMessage,
  type Processor,
  type ProcessorLike,
  type PublishReceipt,
  type SubscribeOptions,
  type Transport,
  type TransportCapabilities,
} from '../transport.js';
import {
  MIN_INVISIBLE_MS,
  resolveRocketMQSettings,
  RETRY_MAX_TIMES_GRACE,
  ROCKETMQ_DEFAULT_RETRY_MAX_TIMES,
  type RocketMQSettings,
  type RocketMQTransportConfig,
} from './rocketmq-config.js';
import type { DeadLetters } from '../dead-letters.js';
import { RocketMQDeadLetters } from './rocketmq-dead-letters.js';
import {
  CLIENT_NAMESPACE,
  clientLogger,
  loadRocketMQDriver,
  type RocketMQDriver,
} from './rocketmq-driver.js';
import { validRocketMQGroup, validRocketMQTopic } from './rocketmq-names.js';
import { RocketMQOrderedLane } from './rocketmq-ordered-subscription.js';
import { RocketMQPublisher } from './rocketmq-publisher.js';
import { RocketMQSettler, type RocketMQSettlerContext } from './rocketmq-settler.js';
import { RocketMQSubscription } from './rocketmq-subscription.js';
import { RocketMQTopology } from './rocketmq-topology.js';
import { ROCKETMQ_UNREACHABLE_HINT } from './rocketmq-remoting.js';
import {
  RocketMQTransactionProducer,
  type RocketMQTransactionProducerConfig,
} from './rocketmq-transaction-producer.js';
import { UnchargedRetries } from '../uncharged-retries.js';

interface Open {
  readonly driver: RocketMQDriver;
  readonly topology: RocketMQTopology;
  readonly publisher: RocketMQPublisher;
}

/** The retry policy's most reconsumes, when the processor is a pipeline. */
function policyReconsumes(processor: Processor): number | undefined {
  const retry = (processor as { readonly retry?: { readonly maxReconsumeTimes?: unknown } }).retry;
  return typeof retry?.maxReconsumeTimes === 'number' ? retry.maxReconsumeTimes : undefined;
}

/** Resolves `work` or fails after `ms` (a SimpleConsumer of a group the proxy refuses never starts). */
async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TransportUnavailableError(`RocketMQ: ${what} did not finish in ${ms} ms`)),
      ms,
    );
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * RocketMQ 5 through its gRPC proxy (`rocketmq-client-nodejs`): a `SimpleConsumer` per member,
 * messages kept invisible while their handler runs, acked after the outcome, retried by the broker's
 * own redelivery after the retry's delay, dead letters in `%DLQ%<group>`; FIFO topics and orderly
 * groups for per-key order; transactional (half) messages with check-back.
 */
export class RocketMQTransport implements Transport {
  readonly name = 'rocketmq';
  /** `%DLQ%<group>` of each group: list, replay to the group only, purge. */
  readonly deadLetters: DeadLetters;
  readonly #settings: RocketMQSettings;
  readonly #subscriptions = new Set<RocketMQSubscription>();
  readonly #producers = new Set<RocketMQTransactionProducer>();
  #opening: Promise<Open> | undefined;
  #closed = false;

  constructor(config: RocketMQTransportConfig = {}) {
    this.#settings = resolveRocketMQSettings(configObject(config, 'config', OPTIONAL_CONFIG));
    this.deadLetters = this.#settings.names.deadLetters(
      new RocketMQDeadLetters(async () => {
        const open = await this.#open();
        return { topology: open.topology, publisher: open.publisher, fifo: this.#settings.fifo };
      }),
    );
  }

  /** Everything but a broker dedup window; `ordering` only on FIFO topics (`fifo: true`). */
  get capabilities(): TransportCapabilities {
    return Object.freeze({
      delay: true,
      deadLetter: true,
      ordering: this.#settings.fifo,
      brokerDedupWindowMs: 0,
      halfMessages: true,
      batch: true,
      keepAlive: true,
    });
  }

  /** The proxy endpoint and name server this transport uses. */
  get endpoints(): {
    /** The proxy's gRPC endpoints (`host:port`). */
    readonly endpoints: string;
    /** The name server (`host:port`), for the admin calls. */
    readonly nameServer: string;
  } {
    return { endpoints: this.#settings.endpoints, nameServer: this.#settings.nameServer };
  }

  /**
   * Loads the client and asks the name server for the cluster's brokers: a name server that cannot be
   * reached fails it with a `TransportUnavailableError` naming the URL, within `requestTimeout`. The
   * other methods load the client themselves.
   */
  async init(): Promise<void> {
    const open = await this.#open();
    await open.topology.admin.masters().catch(this.#unreachable);
  }

  #open(): Promise<Open> {
    if (this.#closed) return Promise.reject(new ClosedError('RocketMQ transport'));
    this.#opening ??= (async () => {
      const driver = await loadRocketMQDriver();
      const topology = new RocketMQTopology(this.#settings);
      return { driver, topology, publisher: new RocketMQPublisher(driver, this.#settings, topology) };
    })().catch((error: unknown) => {
      this.#opening = undefined;
      throw error;
    });
    return this.#opening;
  }

  publish(message: OutgoingMessage): Promise<PublishReceipt> {
    return tracePublish(this.name, message, (traced) => this.#publish(traced).catch(this.#unreachable));
  }

  /**
   * A name server or proxy that cannot be reached, as one line naming the URL and what to run; any
   * other error as it is.
   */
  readonly #unreachable = (error: unknown): never => {
    const down = unreachableCause(error);
    if (down === undefined) throw error;
    const { endpoints, nameServer } = this.#settings;
    throw new TransportUnavailableError(
      unreachableMessage({
        server: 'RocketMQ',
        url: `rocketmq://${endpoints}?namesrv=${nameServer}`,
        detail: down.message,
        hint: ROCKETMQ_UNREACHABLE_HINT,
      }),
      { cause: error },
    );
  };

  async #publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const topic = validRocketMQTopic(this.#settings.names.toBroker(validRocketMQTopic(message.topic)));
    const open = await this.#open();
    const properties: Record<string, string> = { ...message.headers };
    if (message.key !== undefined) properties[KEY_HEADER] = message.key;
    const orderingKey = message.orderingKey ?? message.headers?.[ORDERING_KEY_HEADER];
    if (orderingKey !== undefined) properties[ORDERING_KEY_HEADER] = orderingKey;
    const receipt = await open.publisher.send({
      topic,
      body: Buffer.from(encodeBody(message.body)),
      properties,
      keys: message.key === undefined ? [] : [message.key],
      // On a FIFO topic every message has a message group: its ordering key, else one of its own.
      messageGroup: this.#settings.fifo ? (orderingKey ?? randomUUID()) : undefined,
    });
    return {
      brokerId: receipt.messageId,
      topic: message.topic,
      messageId: receipt.messageId,
      ...(receipt.offset === undefined ? {} : { position: { offset: receipt.offset } }),
    };
  }

  subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options: SubscribeOptions = {},
  ): Promise<RocketMQSubscription> {
    return this.#subscribe(group, topics, processor, options).catch(this.#unreachable);
  }

  async #subscribe(
    named: string,
    namedTopics: readonly string[],
    processor: ProcessorLike,
    options: SubscribeOptions,
  ): Promise<RocketMQSubscription> {
    const { names } = this.#settings;
    const target = names.processor(toProcessor(processor));
    const { concurrency, batchSize, from, ordering } = checkSubscribe(named, namedTopics, target, options, {
      topic: (topic) => validRocketMQTopic(names.toBroker(validRocketMQTopic(topic))),
    });
    validRocketMQGroup(named);
    // The broker's names from here on: the processor sees the application's topic names.
    const group = validRocketMQGroup(names.toBroker(named));
    const topics = namedTopics.map((topic) => names.toBroker(topic));
    if (ordering !== undefined && !this.#settings.fifo) {
      throw new ConfigError(
        'ordering',
        'per-key order on RocketMQ needs FIFO topics and an orderly group: create the transport with fifo: true',
      );
    }
    const visibilityMs = parseDuration(
      options.visibility ?? DEFAULT_SUBSCRIBE_OPTIONS.visibility,
      'visibility',
    );
    if (visibilityMs < MIN_INVISIBLE_MS)
      throw new ConfigError('visibility', 'must be at least 1s (RocketMQ counts invisibility in seconds)');
    const open = await this.#open();
    const settings = this.#settings;
    for (const topic of topics) await open.topology.topic(topic);
    const retryMaxTimes =
      settings.retryMaxTimes ??
      (policyReconsumes(target) ?? ROCKETMQ_DEFAULT_RETRY_MAX_TIMES) + RETRY_MAX_TIMES_GRACE;
    await open.topology.group(group, retryMaxTimes);
    for (const topic of topics) await open.topology.start(group, topic, from);
    const consumer = open.driver.simpleConsumer(
      {
        endpoints: settings.endpoints,
        namespace: CLIENT_NAMESPACE,
        requestTimeout: settings.requestTimeoutMs,
        logger: clientLogger(settings.logger),
        consumerGroup: group,
        subscriptions: new Map(topics.map((topic) => [topic, '*'])),
        awaitDuration: settings.longPollMs,
      },
      settings.logger,
    );
    try {
      await within(
        settings.requestTimeoutMs * 3,
        `starting a consumer of group ${group}`,
        consumer.startup(),
      );
    } catch (error) {
      await consumer.shutdown().catch(() => undefined);
      throw new TransportUnavailableError(
        `RocketMQ: cannot start a consumer of group ${group}: ${errorText(error)}`,
        { cause: error },
      );
    }
    const settlerContext: RocketMQSettlerContext = {
      group,
      consumer,
      publisher: open.publisher,
      uncharged: new UnchargedRetries(),
      failureBackoffMs: settings.failureBackoffMs,
      logger: settings.logger,
    };
    const subscription = new RocketMQSubscription(group, topics, {
      ctx: { ...settlerContext, visibilityMs, settler: new RocketMQSettler(settlerContext) },
      processor: target,
      concurrency,
      batchSize,
      // On FIFO topics every subscription retries in place, ordered or not (RocketMQOrderedLane).
      lane: settings.fifo
        ? new RocketMQOrderedLane(target, ordering ?? {}, concurrency, settings.logger)
        : undefined,
    });
    this.#subscriptions.add(subscription);
    subscription.onClose = () => this.#subscriptions.delete(subscription);
    subscription.start();
    return subscription;
  }

  /**
   * A producer of transactional (half) messages, as the local broker's `createTransactionProducer`:
   * its `check` answers the broker's check-backs of the halves left undecided.
   */
  async createTransactionProducer(
    config: RocketMQTransactionProducerConfig,
  ): Promise<RocketMQTransactionProducer> {
    const open = await this.#open();
    const producer = new RocketMQTransactionProducer(open.driver, this.#settings, open.topology, config);
    await producer.start().catch(this.#unreachable);
    this.#producers.add(producer);
    return producer;
  }

  /** Closes every subscription (each drains), the transaction producers, then the producer. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.close()));
    await Promise.all([...this.#producers].map((producer) => producer.close()));
    const open = await this.#opening?.catch(() => undefined);
    await open?.publisher.close();
  }
}
