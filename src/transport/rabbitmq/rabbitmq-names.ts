import { formatDuration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';

/** Topics: 1 to 127 letters, digits or `_ . : | -` (the local broker's alphabet); the routing key. */
export const RABBIT_TOPIC_PATTERN = /^[A-Za-z0-9_.:|-]{1,127}$/;

export function validTopic(topic: unknown): string {
  if (typeof topic !== 'string' || !RABBIT_TOPIC_PATTERN.test(topic)) {
    throw new ConfigError(
      'topic',
      `${JSON.stringify(topic)} is not a valid topic; use 1 to 127 letters, digits or _ . : | -`,
    );
  }
  return topic;
}

/**
 * Names of everything the transport declares. Groups and topics cannot contain `@`, so the parts
 * after it never collide with another group's queue:
 * - `oncemq.points` — the group's work queue, bound to the exchange once per topic;
 * - `oncemq.points@retry.10s` — one retry queue per delay level, dead-lettering back to the work queue;
 * - `oncemq.points@dead` — the group's dead-letter queue;
 * - `oncemq@log.payments` — the topic's log (a stream), when retention is on;
 * - `oncemq.points@ready.payments` — an exchange marking that the group's queue got the topic's log;
 * - `oncemq.points@p0` … — an ordered group's partition queues (single active consumer each), bound
 *   to the slots `payments@s0` … `payments@s63` of each topic (slot `s` to partition `s mod count`);
 *   a generation made by a drain to `count` partitions is `oncemq.points@p0of8` …;
 * - `oncemq.points@partitions` — an empty queue whose `x-max-length` records an ordered group's
 *   partition count;
 * - `oncemq.points@draining` — while a drain runs, a queue holding one message that lists the old
 *   generation's partition queues.
 */
export class RabbitNames {
  /** First part of every name (`RabbitTransportConfig.prefix`). */
  readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  /** The group's work queue: `oncemq.points`. */
  work(group: string): string {
    return `${this.prefix}.${group}`;
  }

  /** The group's retry queue of one delay level: `oncemq.points@retry.10s`. */
  retry(group: string, levelMs: number): string {
    return `${this.work(group)}@retry.${formatDuration(levelMs)}`;
  }

  /** The group's dead-letter queue: `oncemq.points@dead`. */
  dead(group: string): string {
    return `${this.work(group)}@dead`;
  }

  /** The topic's log stream: `oncemq@log.payments`. */
  log(topic: string): string {
    return `${this.prefix}@log.${topic}`;
  }

  /** The exchange marking that the group's queue got the topic's log: `oncemq.points@ready.payments`. */
  ready(group: string, topic: string): string {
    return `${this.work(group)}@ready.${topic}`;
  }

  /** Partition `index` of the group's first generation, or of the one a drain to `drainedTo` partitions made. */
  partition(group: string, index: number, drainedTo?: number): string {
    return `${this.work(group)}@p${index}${drainedTo === undefined ? '' : `of${drainedTo}`}`;
  }

  /** The queue listing the old generation's partition queues while a drain runs: `oncemq.points@draining`. */
  drainMarker(group: string): string {
    return `${this.work(group)}@draining`;
  }

  /** The empty queue whose `x-max-length` records an ordered group's partition count: `oncemq.points@partitions`. */
  partitionMarker(group: string): string {
    return `${this.work(group)}@partitions`;
  }
}

/**
 * Slots of a topic: every publish also routes (by `BCC`) to the slot `<topic>@s<n>` that a stable hash
 * of its ordering key picks out of {@link RABBIT_SLOTS}, so producers need no partition count. An
 * ordered group binds partition `i` of `count` to every slot `s` with `s mod count = i`: one key, one
 * slot, one partition. The count is at most the number of slots.
 */
export const RABBIT_SLOTS = 64;

export function slotKey(topic: string, slot: number): string {
  return `${topic}@s${slot}`;
}

/**
 * The delay level a retry of `delayMs` waits in: the shortest level at least as long, else the
 * longest (the copy then carries its due time and goes round again until it is due).
 */
export function delayLevel(levelsMs: readonly number[], delayMs: number): number {
  for (const level of levelsMs) if (level >= delayMs) return level;
  return levelsMs.at(-1) ?? delayMs;
}
