import type { Envelope } from '../../core/envelope.js';
import { DELIVERY_COUNT_HEADER, ORDERING_KEY_HEADER, KEY_HEADER } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { Outcome } from '../../core/outcome.js';
import { DEAD_LETTER_HEADERS, deadLetterHeaders, fitDeadLetter } from '../dead-letters.js';
import { OrderingGate } from '../ordered/ordering-gate.js';
import type { OrderingOptions, Processor, Subscription } from '../transport.js';
import { createConsumer, type KafkaDriver } from './kafka-client.js';
import type { KafkaSettings, KafkaSubscribeSettings } from './kafka-config.js';
import { KafkaMember, type MemberDrain, type OrderedLane } from './kafka-member.js';
import { KafkaPartitionRecord } from './kafka-partition-record.js';
import {
  ORIGINAL_OFFSET_HEADER,
  ORIGINAL_PARTITION_HEADER,
  ORIGINAL_TOPIC_HEADER,
  RETRY_DUE_HEADER,
} from './kafka-names.js';
import type { KafkaPublisher } from './kafka-publisher.js';
import { kafkaEnvelope, unreadHeaders, type KafkaMessage } from './kafka-record.js';
import type { KafkaTopology } from './kafka-topology.js';
import { startGroupNow } from './kafka-start-position.js';

/** How often a draining member reads the group's committed offsets. */
const DRAIN_POLL_MS = 250;

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
  #main: KafkaMember | undefined;
  readonly #tiers = new Map<number, Promise<KafkaMember>>();
  #discovery: NodeJS.Timeout | undefined;
  #closing: Promise<void> | undefined;

  /** @internal made by the transport's `subscribe()` */
  constructor(init: KafkaSubscriptionInit) {
    this.#init = init;
    this.group = init.group;
    this.topics = Object.freeze([...init.topics]);
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
    const drain = await this.#drain();
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

  /**
   * An ordered group checks each topic's partition count against the one it last consumed with: a
   * grown topic is refused, or drained (see {@link KafkaPartitionRecord}).
   */
  async #drain(): Promise<MemberDrain | undefined> {
    const { ordering, topology, settings } = this.#init;
    if (ordering === undefined) return undefined;
    const record = new KafkaPartitionRecord(topology.admin, settings.names, this.group);
    const drain = await record.check(this.topics, ordering);
    if (drain.size === 0) return undefined;
    settings.logger.warn('oncemq: draining the old partitions of grown Kafka topics first', {
      group: this.group,
      topics: Object.fromEntries([...drain].map(([topic, { from, to }]) => [topic, `${from} → ${to}`])),
    });
    return {
      before: (message) => {
        const ends = drain.get(message.topic)?.ends;
        if (ends === undefined) return true;
        return message.partition < ends.length && message.offset < (ends[message.partition] ?? 0n);
      },
      finished: async (stop) => {
        for (const [topic, { from, to, ends }] of drain) {
          for (;;) {
            if (stop()) return;
            try {
              if (await record.drained(topic, ends)) break;
            } catch (error) {
              settings.logger.warn('oncemq: cannot read the drain’s progress yet', {
                error: errorText(error),
              });
            }
            await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
          }
          await record.record(topic, to, from);
        }
      },
    };
  }

  #member(topics: string[], groupId: string, delayed: boolean, drain?: MemberDrain): KafkaMember {
    const { driver, settings, member, processor, ordering } = this.#init;
    return new KafkaMember({
      ...(ordering === undefined || delayed ? {} : { ordered: () => this.#lane(ordering) }),
      ...(drain === undefined ? {} : { drain }),
      consumer: createConsumer(driver, settings, groupId, delayed ? undefined : member.instanceId),
      topics,
      concurrency: member.concurrency,
      batchSize: processor.processBatch === undefined ? 1 : member.batchSize,
      delayed,
      settle: (messages) => this.#settle(messages, delayed),
      failureBackoffMs: settings.failureBackoffMs,
      fetchMaxBytes: settings.fetchMaxBytes,
      logger: settings.logger,
    });
  }

  /**
   * An ordering gate over the processor: one key at a time, a retry waits in place (never a retry
   * topic, which would let the key's later records pass it), a dead letter is a confirmed copy in the
   * group's dead-letter topic before the key's next record starts.
   */
  #lane(ordering: OrderingOptions): OrderedLane {
    const { processor, member, settings } = this.#init;
    const messages = new Map<string, KafkaMessage>();
    const gate = new OrderingGate(
      {
        process: async (envelope) => {
          const outcome = await processor.process(envelope);
          const message = messages.get(envelope.brokerId);
          if (outcome.action === 'dead-letter' && message !== undefined)
            await this.#act(outcome, envelope, message);
          return outcome;
        },
      },
      { ...ordering, concurrency: member.concurrency, logger: settings.logger },
    );
    return {
      run: async (message) => {
        const envelope = kafkaEnvelope(message, false);
        messages.set(envelope.brokerId, message);
        try {
          await gate.submit(envelope);
        } finally {
          messages.delete(envelope.brokerId);
        }
      },
      get pending() {
        return gate.pending;
      },
      close: () => gate.close(),
      drained: () => gate.drained(),
    };
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

  async #settle(messages: readonly KafkaMessage[], fromTier: boolean): Promise<void> {
    const envelopes = messages.map((message) => kafkaEnvelope(message, fromTier));
    const processor = this.#init.processor;
    const outcomes =
      envelopes.length > 1 && processor.processBatch !== undefined
        ? await processor.processBatch(envelopes)
        : await Promise.all(envelopes.map((envelope) => processor.process(envelope)));
    if (outcomes.length !== envelopes.length) {
      throw new Error(`processBatch returned ${outcomes.length} outcomes for ${envelopes.length} records`);
    }
    // An ack needs nothing at the broker: only retries and dead letters are waited for.
    const copies: Promise<void>[] = [];
    outcomes.forEach((outcome, i) => {
      if (outcome.action !== 'ack')
        copies.push(this.#act(outcome, envelopes[i] as Envelope, messages[i] as KafkaMessage));
    });
    if (copies.length > 0) await Promise.all(copies);
  }

  /** Acts on one outcome: an ack needs nothing (the offset commits); a retry or a dead letter is a confirmed copy. */
  async #act(outcome: Outcome, envelope: Envelope, message: KafkaMessage): Promise<void> {
    if (outcome.action === 'ack') return;
    const names = this.#init.settings.names;
    const origin = {
      [ORIGINAL_TOPIC_HEADER]: envelope.topic,
      [ORIGINAL_PARTITION_HEADER]: envelope.headers[ORIGINAL_PARTITION_HEADER] ?? String(message.partition),
      [ORIGINAL_OFFSET_HEADER]: envelope.headers[ORIGINAL_OFFSET_HEADER] ?? String(message.offset),
    };
    const key =
      envelope.headers[ORDERING_KEY_HEADER] ??
      envelope.headers[KEY_HEADER] ??
      (message.key as Buffer | null | undefined)?.toString('utf8');
    if (outcome.action === 'retry') {
      const delayMs = Math.max(0, Math.round(outcome.delayMs));
      await this.#tier(delayMs);
      await this.#init.publisher.send({
        topic: names.retryTopic(this.group, delayMs),
        key,
        headers: {
          ...envelope.headers,
          ...origin,
          [DELIVERY_COUNT_HEADER]: String(outcome.nextDeliveryCount),
          [RETRY_DUE_HEADER]: String(Date.now() + delayMs),
        },
        rawHeaders: unreadHeaders(message, envelope),
        body: envelope.body,
      });
      return;
    }
    const reason = outcome.reason;
    const error = 'error' in outcome ? outcome.error : undefined;
    // Too large for the dead-letter topic as it is: stored cut, so that the partition can go on.
    const copy = fitDeadLetter(
      {
        headers: {
          ...deadLetterHeaders(envelope, { group: this.group, reason, error, key: outcome.key }),
          ...origin,
        },
        body: envelope.body,
      },
      { maxBytes: this.#init.settings.maxMessageBytes },
    );
    // The headers that are not text go along unless the copy had to be cut (they are the producer's own).
    const cut = copy.headers[DEAD_LETTER_HEADERS.bodyBytes] !== undefined;
    await this.#init.publisher.send({
      topic: names.deadLetterTopic(this.group),
      key,
      ...copy,
      rawHeaders: cut ? undefined : unreadHeaders(message, envelope),
    });
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
