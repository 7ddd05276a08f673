import { ConfigError } from '../../core/errors.js';
import { validateGroup } from '../../core/group.js';
import { stableHash } from '../partitions.js';

/**
 * How oncemq names what it keeps in JetStream. A topic is one stream with one subject; a group is
 * one durable pull consumer on each topic's stream, plus one on the shared retry stream (filtered on
 * the group's retry subject); dead letters of every group share one stream, one subject per group.
 *
 * | what                  | stream                   | subject                        | consumer          |
 * | --------------------- | ------------------------ | ------------------------------ | ----------------- |
 * | topic `T`             | `ONCEMQ_T`               | `oncemq.T.s.<6 slot bits>`     | group (escaped)   |
 * | partition i of P      | `ONCEMQ_T`               | `oncemq.T.s.<log2 P bits>.>`   | group`@p`i`of`P   |
 * | partition leases      | `ONCEMQ-LEASES` (max age) | `oncemq-lease.G.P.i`           | none (read last)  |
 * | partition counts      | `ONCEMQ-ORDERING`        | `oncemq-ordering.G`            | none (read last)  |
 * | retries of group `G`  | `ONCEMQ-RETRY` (work q.) | `oncemq-retry.G`               | group (escaped)   |
 * | dead letters of `G`   | `ONCEMQ-DLQ`             | `oncemq-dlq.G`                 | none (read by seq) |
 */
export interface NatsNames {
  readonly streamPrefix: string;
  readonly subjectPrefix: string;
}

/** Topics on NATS: letters, digits, `_` and `-` (a topic is one subject token and part of a stream name). */
export const NATS_TOPIC_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** Stream name prefixes: letters, digits, `_` and `-`. */
export const STREAM_PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Subject prefixes: dot-separated tokens of letters, digits, `_` and `-` (no wildcards). */
export const SUBJECT_PREFIX_PATTERN = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

/** Header of a retry copy: the topic the message was first published to. */
export const RETRY_TOPIC_HEADER = 'oncemq-retry-topic';
/** Header of a retry copy: when it is due, in milliseconds since the epoch. */
export const RETRY_DUE_HEADER = 'oncemq-retry-due-at';
/** Header of a retry copy: when the first copy was published, in milliseconds since the epoch. */
export const RETRY_PUBLISHED_HEADER = 'oncemq-retry-published-at';

/** Header of a replayed dead letter of an ordered group: only that group runs it, the others ack it unseen. */
export const REPLAY_GROUP_HEADER = 'oncemq-replay-group';

/** Headers the transport writes for itself; envelopes do not show them (nor the server's `Nats-*` headers). */
export const INTERNAL_HEADERS: ReadonlySet<string> = new Set([
  RETRY_TOPIC_HEADER,
  RETRY_DUE_HEADER,
  RETRY_PUBLISHED_HEADER,
  REPLAY_GROUP_HEADER,
]);

export function validNatsTopic(topic: unknown): string {
  if (typeof topic !== 'string' || !NATS_TOPIC_PATTERN.test(topic)) {
    throw new ConfigError(
      'topic',
      `${JSON.stringify(topic)} is not a valid topic on NATS; use 1 to 128 letters, digits, _ or -`,
    );
  }
  return topic;
}

export const topicStream = (names: NatsNames, topic: string): string => `${names.streamPrefix}_${topic}`;
export const topicSubject = (names: NatsNames, topic: string): string => `${names.subjectPrefix}.${topic}`;
export const retryStream = (names: NatsNames): string => `${names.streamPrefix}-RETRY`;
export const retrySubjects = (names: NatsNames): string => `${names.subjectPrefix}-retry.>`;
export const retrySubject = (names: NatsNames, group: string): string =>
  `${names.subjectPrefix}-retry.${validateGroup(group)}`;
export const deadLetterStream = (names: NatsNames): string => `${names.streamPrefix}-DLQ`;
export const deadLetterSubjects = (names: NatsNames): string => `${names.subjectPrefix}-dlq.>`;
export const deadLetterSubject = (names: NatsNames, group: string): string =>
  `${names.subjectPrefix}-dlq.${validateGroup(group)}`;

/**
 * The durable consumer name of a group: the group itself, with `%` and `.` escaped (`.` is not
 * allowed in JetStream names), so that two groups never share a consumer.
 */
export function consumerName(group: string): string {
  return validateGroup(group).replace(/%/g, '%25').replace(/\./g, '%2E');
}

/** Slots of a topic: every publish goes to one, `stableHash(orderingKey) mod 64` (random without a key). */
export const ORDERING_SLOTS = 64;
const SLOT_BITS = 6;

/** Bits of `n`, least significant first, one subject token each. */
const bits = (n: number, count: number): string[] =>
  Array.from({ length: count }, (_, bit) => String((n >> bit) & 1));

/** The subject a message of `orderingKey` is published to: its slot's bits, least significant first. */
export function slotSubject(names: NatsNames, topic: string, orderingKey: string | undefined): string {
  const slot =
    orderingKey === undefined
      ? Math.floor(Math.random() * ORDERING_SLOTS)
      : stableHash(orderingKey) % ORDERING_SLOTS;
  return [topicSubject(names, topic), 's', ...bits(slot, SLOT_BITS)].join('.');
}

/** Every slot subject of a topic (what its stream stores besides the bare topic subject of older producers). */
export const slotSubjects = (names: NatsNames, topic: string): string => `${topicSubject(names, topic)}.s.>`;

/**
 * The filter of partition `index` of `count` (a power of two): the slots whose low bits are `index`,
 * i.e. `slot mod count = index`, as one subject with a wildcard (JetStream 2.9 has one filter per consumer).
 */
export function partitionFilter(names: NatsNames, topic: string, index: number, count: number): string {
  const prefix = [topicSubject(names, topic), 's', ...bits(index, Math.log2(count))];
  return count === ORDERING_SLOTS ? prefix.join('.') : [...prefix, '>'].join('.');
}

/** The durable consumer of partition `index` of `count` of an ordered group (a group never contains `@`). */
export const partitionConsumer = (group: string, index: number, count: number): string =>
  `${consumerName(group)}@p${index}of${count}`;

export const leaseStream = (names: NatsNames): string => `${names.streamPrefix}-LEASES`;
export const leaseSubjects = (names: NatsNames): string => `${names.subjectPrefix}-lease.>`;
export const leaseSubject = (names: NatsNames, group: string, index: number, count: number): string =>
  `${names.subjectPrefix}-lease.${consumerName(group)}.${count}.${index}`;
export const orderingStream = (names: NatsNames): string => `${names.streamPrefix}-ORDERING`;
export const orderingSubjects = (names: NatsNames): string => `${names.subjectPrefix}-ordering.>`;
export const orderingSubject = (names: NatsNames, group: string): string =>
  `${names.subjectPrefix}-ordering.${consumerName(group)}`;

/** The broker id of a stored copy: its stream and sequence, `ONCEMQ_payments:42`. */
export const brokerIdOf = (stream: string, seq: number): string => `${stream}:${seq}`;
