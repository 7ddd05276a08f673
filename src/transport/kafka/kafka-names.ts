import { ConfigError } from '../../core/errors.js';

/** Kafka's topic alphabet and length: letters, digits, `.`, `_` and `-`, at most 249 characters. */
export const KAFKA_TOPIC_PATTERN = /^[A-Za-z0-9._-]{1,249}$/;

/** Topic name prefix pattern of the retry and dead-letter topics. */
export const KAFKA_PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Header: the topic a retried or dead-lettered copy was first published to. */
export const ORIGINAL_TOPIC_HEADER = 'oncemq-original-topic';
/** Header: the partition of the copy that was retried or dead-lettered. */
export const ORIGINAL_PARTITION_HEADER = 'oncemq-original-partition';
/** Header: the offset of the copy that was retried or dead-lettered. */
export const ORIGINAL_OFFSET_HEADER = 'oncemq-original-offset';
/** Header: when a copy in a retry topic is due (milliseconds since the epoch). */
export const RETRY_DUE_HEADER = 'oncemq-retry-due';
/** Header of a dead-letter topic's settle marker: the id of the dead letter replayed or purged. */
export const SETTLED_HEADER = 'oncemq-dead-settled';

/** Checks a topic name against Kafka's alphabet. */
export function validKafkaTopic(topic: unknown, field = 'topic'): string {
  if (typeof topic !== 'string' || !KAFKA_TOPIC_PATTERN.test(topic)) {
    throw new ConfigError(
      field,
      `${JSON.stringify(topic)} is not a Kafka topic name; use 1 to 249 letters, digits, '.', '_' or '-'`,
    );
  }
  return topic;
}

/** The broker id of a stored record: `<topic>/<partition>/<offset>`. */
export function kafkaBrokerId(topic: string, partition: number, offset: bigint | string): string {
  return `${topic}/${partition}/${String(offset)}`;
}

/** Parses a broker id made by {@link kafkaBrokerId}; `null` when it is not one. */
export function parseKafkaBrokerId(
  id: string,
): { readonly topic: string; readonly partition: number; readonly offset: bigint } | null {
  const match = /^([A-Za-z0-9._-]{1,249})\/(\d{1,9})\/(\d{1,19})$/.exec(id);
  if (match === null) return null;
  return { topic: match[1] as string, partition: Number(match[2]), offset: BigInt(match[3] as string) };
}

/**
 * The names of a group's own topics. Retry and dead-letter topics belong to the consumer group, not
 * to the topic: a subscription may read several topics, and the dead-letter tools know only the
 * group. A group name's `:`, `%` and `|` (allowed by oncemq, not by Kafka) are written as `_`.
 */
export class KafkaNames {
  constructor(
    /** First word of every group topic (`KafkaTransportConfig.prefix`), checked. */
    readonly prefix: string,
  ) {
    if (!KAFKA_PREFIX_PATTERN.test(prefix)) {
      throw new ConfigError(
        'prefix',
        `${JSON.stringify(prefix)} must be 1 to 64 letters, digits, '_' or '-'`,
      );
    }
  }

  #group(group: string): string {
    return group.replace(/[:%|]/g, '_');
  }

  /** `<prefix>.<group>.retry.<delayMs>`: the retry tier of one delay. */
  retryTopic(group: string, delayMs: number): string {
    return validKafkaTopic(`${this.prefix}.${this.#group(group)}.retry.${Math.max(0, Math.round(delayMs))}`);
  }

  /** The first part of every retry tier topic of `group`. */
  retryTopicPrefix(group: string): string {
    return `${this.prefix}.${this.#group(group)}.retry.`;
  }

  /** The delay of a retry tier topic of `group`, or `null` when `topic` is not one. */
  retryDelayOf(group: string, topic: string): number | null {
    const start = this.retryTopicPrefix(group);
    if (!topic.startsWith(start)) return null;
    const rest = topic.slice(start.length);
    return /^\d{1,12}$/.test(rest) ? Number(rest) : null;
  }

  /** `<prefix>.<group>.dlt`: the group's dead-letter topic. */
  deadLetterTopic(group: string): string {
    return validKafkaTopic(`${this.prefix}.${this.#group(group)}.dlt`);
  }

  /**
   * `<prefix>.<group>.partitions`: a Kafka group with no members whose committed offset of a topic's
   * partition 0 records the partition count an ordered group last consumed the topic with.
   */
  partitionRecordGroup(group: string): string {
    return `${this.prefix}.${this.#group(group)}.partitions`;
  }

  /**
   * `<prefix>.<group>.drain`: while an ordered group drains a grown topic, its committed offsets are
   * the end offsets the old partitions had at the change (what is drained before anything newer).
   */
  drainGroup(group: string): string {
    return `${this.prefix}.${this.#group(group)}.drain`;
  }

  /** The Kafka consumer group reading the retry tier of `delayMs` (its own group, so tiers rebalance apart). */
  retryGroup(group: string, delayMs: number): string {
    return this.retryTopic(group, delayMs);
  }
}
