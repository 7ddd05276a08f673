import { tracePublish } from '../../telemetry/trace-publish.js';
import type { Admin, Producer } from '@platformatic/kafka';
import { TransportClosedError } from '../../core/errors.js';
import { configObject } from '../config-checks.js';
import type { DeadLetters } from '../dead-letters.js';
import { checkSubscribe } from '../subscribe-options.js';
import {
  toProcessor,
  type OutgoingMessage,
  type ProcessorLike,
  type PublishReceipt,
  type Transport,
  type TransportCapabilities,
} from '../transport.js';
import {
  createAdmin,
  createProducer,
  firstContact,
  kafkaUrl,
  loadKafkaDriver,
  type KafkaDriver,
} from './kafka-driver.js';
import {
  resolveKafkaSettings,
  resolveKafkaSubscribeSettings,
  type KafkaSettings,
  type KafkaSubscribeOptions,
  type KafkaTransportConfig,
} from './kafka-config.js';
import { KafkaDeadLetters } from './kafka-dead-letters.js';
import { validKafkaTopic } from './kafka-names.js';
import { KafkaPublisher } from './kafka-publisher.js';
import { KafkaSubscription } from './kafka-subscription.js';
import { KafkaTopology } from './kafka-topology.js';
import { guardHeaders } from '../header-guard.js';
import { kafkaHeaderCheck } from './kafka-record.js';

interface Opened {
  readonly driver: KafkaDriver;
  readonly producer: Producer;
  readonly admin: Admin;
  readonly publisher: KafkaPublisher;
  readonly topology: KafkaTopology;
}

/**
 * Kafka as an oncemq transport (`@platformatic/kafka`, Kafka 3.x/4.x). A topic is a topic, a consumer
 * group a Kafka consumer group; retries go through one retry topic per delay, dead letters to a
 * topic per group. See docs/transports/kafka.md.
 */
export class KafkaTransport implements Transport {
  readonly name = 'kafka';
  readonly capabilities: TransportCapabilities = Object.freeze({
    delay: true,
    deadLetter: true,
    ordering: true,
    // The idempotent producer's dedup covers its own resends within one producer session only.
    brokerDedupWindowMs: 0,
    halfMessages: false,
    batch: true,
    keepAlive: false,
  });
  /** The configuration, checked, with its defaults, durations in milliseconds. */
  readonly settings: KafkaSettings;
  /** The groups' dead-letter topics: list, replay to the group only, purge. */
  readonly deadLetters: DeadLetters;
  readonly #subscriptions = new Set<KafkaSubscription>();
  #opening: Promise<Opened> | undefined;
  #closed = false;

  constructor(config: KafkaTransportConfig) {
    this.settings = resolveKafkaSettings(
      configObject(config, 'url', 'pass { url: "kafka://host:9092" } or { brokers: ["host:9092"] }'),
    );
    this.deadLetters = this.settings.namespace.deadLetters(
      new KafkaDeadLetters(this.settings, () => this.#open()),
    );
  }

  /**
   * Loads the client and asks the brokers for the cluster's metadata (done by the first call that
   * needs them): brokers that cannot be reached fail it within the transport's `timeout` with a
   * `TransportUnavailableError` naming the URL.
   */
  async init(): Promise<void> {
    await this.#open();
  }

  #open(): Promise<Opened> {
    if (this.#closed) return Promise.reject(new TransportClosedError('the kafka transport is closed'));
    this.#opening ??= (async () => {
      const driver = await loadKafkaDriver();
      const admin = createAdmin(driver, this.settings);
      const producer = createProducer(driver, this.settings);
      try {
        await firstContact(kafkaUrl(this.settings), this.settings.timeoutMs, admin.metadata({ topics: [] }));
      } catch (error) {
        await Promise.all([admin.close(), producer.close()].map((closing) => closing.catch(() => undefined)));
        throw error;
      }
      const topology = new KafkaTopology(admin, this.settings);
      const opened = { driver, producer, admin, topology, publisher: new KafkaPublisher(producer, topology) };
      return opened;
    })();
    this.#opening.catch(() => (this.#opening = undefined));
    return this.#opening;
  }

  /**
   * Stores the message in its topic (created when missing, topology `create`) through the idempotent
   * producer, and resolves on the acknowledgement of every in-sync replica. The record key is the
   * ordering key, else the business key, so that one key stays in one partition.
   */
  async publish(message: OutgoingMessage): Promise<PublishReceipt> {
    validKafkaTopic(message.topic);
    const { publisher } = await this.#open();
    const { namespace } = this.settings;
    return tracePublish(this.name, message, async (traced) => {
      const receipt = await publisher.publish({ ...traced, topic: namespace.toBroker(traced.topic) });
      return { ...receipt, topic: traced.topic };
    });
  }

  /**
   * Joins `group` on `topics` as one member and drives `processor` with every record. See
   * {@link KafkaSubscribeOptions} for how the options map.
   */
  async subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options: KafkaSubscribeOptions = {},
  ): Promise<KafkaSubscription> {
    const { namespace } = this.settings;
    const target = toProcessor(processor);
    const checked = checkSubscribe(group, topics, target, options, {
      topic: (topic) => void validKafkaTopic(namespace.toBroker(validKafkaTopic(topic))),
    });
    const unique = [...new Set(checked.topics.map((topic) => namespace.toBroker(topic)))];
    const member = resolveKafkaSubscribeSettings(options, checked);
    const opened = await this.#open();
    const subscription: KafkaSubscription = new KafkaSubscription({
      group: namespace.toBroker(group),
      topics: unique,
      // The headers are checked against the broker's names; the processor sees the application's.
      processor: guardHeaders(
        namespace.processor(target),
        group,
        kafkaHeaderCheck(unique),
        this.settings.logger,
      ),
      driver: opened.driver,
      settings: this.settings,
      member,
      publisher: opened.publisher,
      topology: opened.topology,
      ordering: checked.ordering,
      onClosed: () => this.#subscriptions.delete(subscription),
    });
    this.#subscriptions.add(subscription);
    try {
      await subscription.start();
    } catch (error) {
      await subscription.close();
      throw error;
    }
    return subscription;
  }

  /** Closes every subscription (each drains and commits), then the producer and the admin client. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.close()));
    const opened = await this.#opening?.catch(() => undefined);
    await opened?.producer.close().catch(() => undefined);
    await opened?.admin.close().catch(() => undefined);
  }
}
