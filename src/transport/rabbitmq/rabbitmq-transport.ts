import { tracePublish } from '../../telemetry/trace-publish.js';
import { ClosedError } from '../../core/errors.js';
import { configObject, OPTIONAL_CONFIG } from '../config-checks.js';
import {
  toProcessor,
  type OutgoingMessage,
  type ProcessorLike,
  type PublishReceipt,
  type SubscribeOptions,
  type Transport,
  type TransportCapabilities,
} from '../transport.js';
import { rabbitSettings, type RabbitSettings, type RabbitTransportConfig } from './rabbitmq-config.js';
import { RabbitConnection } from './rabbitmq-connection.js';
import { RabbitDeadLetters } from './rabbitmq-dead-letters.js';
import { guardHeaders } from '../header-guard.js';
import { rabbitHeaderCheck } from './rabbitmq-message.js';
import { RabbitNames, validTopic } from './rabbitmq-names.js';
import { RabbitOrderedSubscription } from './rabbitmq-ordered-subscription.js';
import { RabbitPublisher } from './rabbitmq-publisher.js';
import { MAX_PREFETCH, RabbitSubscription } from './rabbitmq-subscription.js';
import { checkSubscribe } from '../subscribe-options.js';
import { RabbitTopology } from './rabbitmq-topology.js';

/**
 * RabbitMQ through amqplib: a direct exchange whose routing keys are the topics; per group a durable
 * work queue bound to its topics, one retry queue per delay level and a dead-letter queue; per topic
 * a log (a stream) from which a new group's queue is filled. Publishes are confirmed, mandatory and
 * carry a new `message-id` per stored copy: that is the broker id.
 */
export class RabbitTransport implements Transport {
  readonly name = 'rabbitmq';
  readonly capabilities: TransportCapabilities = Object.freeze({
    delay: true,
    deadLetter: true,
    ordering: true,
    brokerDedupWindowMs: 0,
    halfMessages: false,
    batch: true,
    keepAlive: true,
  });
  /** The configuration, checked, with its defaults. */
  readonly settings: RabbitSettings;
  readonly deadLetters: RabbitDeadLetters;
  readonly #connection: RabbitConnection;
  readonly #topology: RabbitTopology;
  readonly #subscriptions = new Set<RabbitSubscription | RabbitOrderedSubscription>();
  readonly #publisher: RabbitPublisher;
  #closed = false;

  constructor(config: RabbitTransportConfig = {}) {
    this.settings = rabbitSettings(configObject(config, 'config', OPTIONAL_CONFIG));
    this.#connection = new RabbitConnection(this.settings);
    this.#topology = new RabbitTopology(
      this.settings,
      this.#connection,
      new RabbitNames(this.settings.prefix),
    );
    this.deadLetters = new RabbitDeadLetters(this.settings, this.#connection, this.#topology);
    this.#publisher = new RabbitPublisher({
      settings: this.settings,
      connection: this.#connection,
      topology: this.#topology,
      init: () => this.init(),
      refuseClosed: () => this.#refuseClosed(),
      closed: () => this.#closed,
    });
  }

  /** Connects (and with topology `check`, checks the exchange). Idempotent; the other methods call it. */
  async init(): Promise<void> {
    this.#refuseClosed();
    await this.#connection.open();
  }

  /** The names this transport gives its queues. */
  get names(): RabbitNames {
    return this.#topology.names;
  }

  /** Queues and exchanges declared or checked so far (a test removes them after itself). */
  get declared(): {
    /** Queues declared or checked. */
    readonly queues: ReadonlySet<string>;
    /** Exchanges declared or checked. */
    readonly exchanges: ReadonlySet<string>;
  } {
    return this.#topology.declared;
  }

  /** Whether the group queues are quorum queues (else classic), once connected. */
  get quorum(): boolean {
    return this.#topology.quorum;
  }

  /** The server's version, once connected. */
  get serverVersion(): string | undefined {
    return this.#connection.serverVersion;
  }

  /**
   * Publishes to the exchange with the topic as routing key and resolves once the broker confirmed
   * the stored copy, inside a producer span whose trace context travels in the headers
   * (docs/observability.md). A copy whose confirm is lost is sent again as a new copy, at most
   * `publishAttempts` times; an unroutable message (no queue or log bound to the topic) is refused at once.
   */
  publish(message: OutgoingMessage): Promise<PublishReceipt> {
    return tracePublish(this.name, message, (traced) => this.#publisher.publish(traced));
  }

  /**
   * Joins `group`: declares (or checks) its queue bound to `topics` and consumes from it. Options:
   * `concurrency` is the prefetch; `batchSize` the most deliveries handed to `processBatch` at once
   * (@default the concurrency); `consumerName` the consumer tag's prefix; `visibility` is not used
   * (RabbitMQ holds a delivery for as long as its channel lives). With `ordering`, the group consumes
   * its partition queues instead, one key at a time (docs/transports/rabbitmq.md, "Per-key ordering").
   */
  subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options?: SubscribeOptions & { readonly ordering?: undefined },
  ): Promise<RabbitSubscription>;
  subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options?: SubscribeOptions,
  ): Promise<RabbitSubscription | RabbitOrderedSubscription>;
  async subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options: SubscribeOptions = {},
  ): Promise<RabbitSubscription | RabbitOrderedSubscription> {
    this.#refuseClosed();
    const own = toProcessor(processor);
    const checked = checkSubscribe(group, topics, own, options, {
      topic: (topic) => void validTopic(topic),
      maxBatchSize: MAX_PREFETCH,
      noEarliest: this.#noEarliest(options.ordering !== undefined),
    });
    const target = guardHeaders(own, group, rabbitHeaderCheck(topics), this.settings.logger);
    await this.init();
    const ctx = { settings: this.settings, connection: this.#connection, topology: this.#topology };
    const subscription =
      options.ordering === undefined
        ? new RabbitSubscription(ctx, checked, target, options.consumerName)
        : new RabbitOrderedSubscription(ctx, checked, target, options.consumerName);
    await subscription.start();
    this.#subscriptions.add(subscription);
    subscription.onClose = () => this.#subscriptions.delete(subscription);
    return subscription;
  }

  /** Why a new group cannot start at `earliest` here, if it cannot. */
  #noEarliest(ordered: boolean): string | undefined {
    if (ordered) {
      return 'an ordered group on RabbitMQ starts with what is published after its partition queues exist (copies from the topic log would land behind later messages of their key)';
    }
    return this.settings.retentionMs === false
      ? 'this RabbitMQ transport keeps no topic logs (retention: false), so a new group cannot get what was published before its queue existed'
      : undefined;
  }

  #refuseClosed(): void {
    if (this.#closed) throw new ClosedError('RabbitMQ transport');
  }

  /** Closes every subscription (draining it), the publishing channel and the connection it opened. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.close()));
    await this.#publisher.close();
    await this.#connection.close();
  }
}
