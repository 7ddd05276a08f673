import { ConfigError } from '../../core/errors.js';

/** Topics: 1–127 letters, digits or `_ . : | -` (the local broker's alphabet), so any broker takes them. */
export const STREAM_TOPIC_PATTERN = /^[A-Za-z0-9_.:|-]{1,127}$/;

/** Key prefixes: 1–64 letters, digits or `_ . : - { }` (braces for a Redis Cluster hash tag). */
export const STREAM_PREFIX_PATTERN = /^[A-Za-z0-9_.:{}-]{1,64}$/;

/** Validates a topic name. */
export function validTopic(topic: unknown, field = 'topic'): string {
  if (typeof topic !== 'string' || !STREAM_TOPIC_PATTERN.test(topic)) {
    throw new ConfigError(
      field,
      `${JSON.stringify(topic)} is not a valid topic; use 1 to 127 letters, digits or _ . : | -`,
    );
  }
  return topic;
}

/**
 * The Redis keys of one prefix. Every group reads its topics' streams and its own retry stream under
 * its own name as the consumer group; the second word of every key says what it holds, so no topic
 * or group name can make two keys collide.
 */
export class StreamKeys {
  constructor(
    /** First word of every key (`RedisStreamsTransportConfig.prefix`), checked. */
    readonly prefix: string,
  ) {
    if (typeof prefix !== 'string' || !STREAM_PREFIX_PATTERN.test(prefix)) {
      throw new ConfigError(
        'prefix',
        `${JSON.stringify(prefix)} is not a valid key prefix; use 1 to 64 letters, digits or _ . : - { }`,
      );
    }
  }

  /** The stream a topic's messages are published to: `<prefix>:stream:<topic>`. */
  topic(topic: string): string {
    return `${this.prefix}:stream:${topic}`;
  }

  /** The group's retry stream (delayed retries once due, and replayed dead letters): `<prefix>:retry:<group>`. */
  retry(group: string): string {
    return `${this.prefix}:retry:${group}`;
  }

  /** The group's delayed retries, a sorted set by due time: `<prefix>:delayed:<group>`. */
  delayed(group: string): string {
    return `${this.prefix}:delayed:${group}`;
  }

  /** The group's dead-letter stream: `<prefix>:dead:<group>`. */
  deadLetters(group: string): string {
    return `${this.prefix}:dead:${group}`;
  }

  /**
   * Shard stream `slot` of a topic, read by ordered groups only: `<prefix>:shard:<topic>@<slot>`
   * (`@` is in no topic's alphabet, so the slot is always the part after the last `@`).
   */
  shard(topic: string, slot: number): string {
    return `${this.prefix}:shard:${topic}@${slot}`;
  }

  /** The shard stream a broker id names, or `undefined` when it names another stream. */
  shardOf(brokerId: string): string | undefined {
    const stream = brokerId.slice(0, brokerId.lastIndexOf('/'));
    return stream.startsWith(`${this.prefix}:shard:`) && /@\d{1,2}$/.test(stream) ? stream : undefined;
  }

  /** Set of the ordered groups of a topic; while it exists, publishes also go to the topic's shards. */
  orderedGroups(topic: string): string {
    return `${this.prefix}:ordered:${topic}`;
  }

  /** The partition count recorded for an ordered group: `<prefix>:partitions:<group>`. */
  partitions(group: string): string {
    return `${this.prefix}:partitions:${group}`;
  }

  /** The owner lease of partition `index` of an ordered group of `count` partitions. */
  lease(group: string, count: number, index: number): string {
    return `${this.prefix}:lease:${group}@${count}.${index}`;
  }
}

/** Shard streams per topic: a producer picks one by `stableHash(orderingKey) mod SHARD_SLOTS`. */
export const SHARD_SLOTS = 64;

/** Stream entry ids as Redis writes them: milliseconds and a sequence number. */
export const ENTRY_ID_PATTERN = /^\d{1,20}-\d{1,20}$/;

/** The broker id of a stored copy: its stream key and entry id, `oncemq:stream:payments/1718000000000-0`. */
export function streamBrokerId(stream: string, id: string): string {
  return `${stream}/${id}`;
}
