import { errorText } from '../../core/errors.js';
import { processAndSettleBatch, type SettleableDelivery } from '../settle-batch.js';
import { settle, type DeliveryResult } from '../settler.js';
import type { OrderingOptions, Processor, Subscription } from '../transport.js';
import { createConsumer, type KafkaDriver } from './kafka-driver.js';
import type { KafkaSettings, KafkaSubscribeSettings } from './kafka-config.js';
import { KafkaMember } from './kafka-member.js';
import { KafkaOrderedSubscription, type MemberDrain } from './kafka-ordered-subscription.js';
import type { KafkaPublisher } from './kafka-publisher.js';
import { kafkaEnvelope, type KafkaMessage } from './kafka-record.js';
import { KafkaSettler } from './kafka-settler.js';
import type { KafkaTopology } from './kafka-topology.js';
import { startGroupNow } from './kafka-start-position.js';

export interface KafkaSubscriptionInit {
  readonly group: string;
  readonly topics: readonly string[];
  readonly processor: Processor;
  readonly driver: KafkaDriver;
  readonly settings: KafkaSettings;
  readonly member: KafkaSubscribeSettings;
  readonly publisher: KafkaPublisher;
  readonly topology: KafkaTopology;
  /** Per-key order: records of the group's topics go through an ordering gate, retried in place. */
  readonly ordering: OrderingOptions | undefined;
  readonly onClosed: () => void;
}

/**
 * One member of a consumer group on Kafka: a Kafka consumer in the group on its topics, and one in
 * each retry tier's own Kafka group (`<prefix>.<group>.retry.<delayMs>`). A retry is a copy
 * published to the tier of its delay, a dead letter a copy published to `<prefix>.<group>.dlt`; each
 * is confirmed before the original's offset may be committed.
 */
export class KafkaSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly #init: KafkaSubscriptionInit;
  readonly #settler: KafkaSettler;
  /** What makes the subscription ordered; undefined for an unordered one. */
  readonly #ordered: KafkaOrderedSubscription | undefined;
  #main: KafkaMember | undefined;
  readonly #tiers = new Map<number, Promise<KafkaMember>>();
  #discovery: NodeJS.Timeout | undefined;
  #closing: Promise<void> | undefined;

  /** @internal made by the transport's `subscribe()` */
  constructor(init: KafkaSubscriptionInit) {
    this.#init = init;
    this.group = init.group;
    this.topics = Object.freeze([...init.topics]);
    this.#settler = new KafkaSettler({
      group: init.group,
      names: init.settings.names,
      publisher: init.publisher,
      maxMessageBytes: init.settings.maxMessageBytes,
      tier: (delayMs) => this.#tier(delayMs),
    });
    this.#ordered =
      init.ordering === undefined
        ? undefined
        : new KafkaOrderedSubscription({
            group: init.group,
            topics: this.topics,
            ordering: init.ordering,
            processor: init.processor,
            settler: this.#settler,
            concurrency: init.member.concurrency,
            admin: init.topology.admin,
            names: init.settings.names,
            logger: init.settings.logger,
          });
  }

  /** Creates what is missing (topics, the dead-letter topic, tier 0 where replays go), joins, starts reading. */
  async start(): Promise<void> {
    const { topology, settings } = this.#init;
    const names = settings.names;
    for (const topic of this.topics) await topology.ensure(topic);
    await topology.ensure(names.deadLetterTopic(this.group));
    await topology.ensure(names.retryTopic(this.group, 0));
    if (this.#init.member.from === 'now')
      await startGroupNow(topology.admin, this.group, this.topics, settings.logger);
    const drain = await this.#ordered?.drain();
    this.#main = this.#member([...this.topics], this.group, false, drain);
    await this.#main.start();
    await this.#discoverTiers();
    this.#discovery = setInterval(() => {
      this.#discoverTiers().catch((error: unknown) =>
        settings.logger.warn('oncemq: cannot look for Kafka retry tiers', { error: errorText(error) }),
      );
    }, settings.retryDiscoveryMs);
    this.#discovery.unref();
  }

  #member(topics: string[], groupId: string, delayed: boolean, drain?: MemberDrain): KafkaMember {
    const { driver, settings, member } = this.#init;
    const ordered = this.#ordered;
    return new KafkaMember({
      ...(ordered === undefined || delayed ? {} : { ordered: () => ordered.lane() }),
      ...(drain === undefined ? {} : { drain }),
      consumer: createConsumer(driver, settings, groupId, delayed ? undefined : member.instanceId),
      topics,
      concurrency: member.concurrency,
      batchSize: member.batchSize,
      delayed,
      settle: (messages) => this.#settle(messages, delayed),
      failureBackoffMs: settings.failureBackoffMs,
      fetchMaxBytes: settings.fetchMaxBytes,
      logger: settings.logger,
    });
  }

  /** Starts a member on every retry tier of the group that exists and has none here yet. */
  async #discoverTiers(): Promise<void> {
    const names = this.#init.settings.names;
    for (const topic of await this.#init.topology.list()) {
      const delay = names.retryDelayOf(this.group, topic);
      if (delay !== null) await this.#tier(delay);
    }
  }

  #tier(delayMs: number): Promise<KafkaMember> {
    let tier = this.#tiers.get(delayMs);
    if (tier === undefined) {
      const names = this.#init.settings.names;
      const topic = names.retryTopic(this.group, delayMs);
      tier = (async () => {
        await this.#init.topology.ensure(topic);
        const member = this.#member([topic], names.retryGroup(this.group, delayMs), true);
        await member.start();
        return member;
      })();
      tier.catch(() => this.#tiers.delete(delayMs));
      this.#tiers.set(delayMs, tier);
    }
    return tier;
  }

  /**
   * Processes records (in one `processBatch` when there are several and the processor has one) and
   * settles each through the settler; resolves once every copy is confirmed. A failure rejects: the
   * member processes the records again after its backoff.
   */
  async #settle(messages: readonly KafkaMessage[], fromTier: boolean): Promise<void> {
    const settler = this.#settler;
    const batch = messages.map((message): SettleableDelivery => {
      const delivery = { message, envelope: kafkaEnvelope(message, fromTier) };
      return { envelope: delivery.envelope, settle: (result) => settle(settler, delivery, result) };
    });
    const { processor } = this.#init;
    if (batch.length > 1 && processor.processBatch !== undefined) {
      await processAndSettleBatch(processor.processBatch.bind(processor), batch);
      return;
    }
    await Promise.all(batch.map(async (delivery) => delivery.settle(await processed(processor, delivery))));
  }

  /** Stops reading, lets the records in flight reach their outcome and commit, then leaves the groups. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#discovery !== undefined) clearInterval(this.#discovery);
      const tiers = await Promise.allSettled([...this.#tiers.values()]);
      await Promise.all([
        this.#main?.close(),
        ...tiers.map((tier) => (tier.status === 'fulfilled' ? tier.value.close() : undefined)),
      ]);
      this.#init.onClosed();
    })();
    return this.#closing;
  }
}

/** The processor's outcome of one delivery, or its error. */
async function processed(processor: Processor, delivery: SettleableDelivery): Promise<DeliveryResult> {
  try {
    return { outcome: await processor.process(delivery.envelope) };
  } catch (error) {
    return { error };
  }
}
