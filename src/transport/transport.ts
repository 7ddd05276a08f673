/**
 * The transport contract: what oncemq needs from a broker adapter. Core only — no I/O, no driver.
 * It fits the local broker, RabbitMQ, NATS JetStream, Redis Streams, Kafka and RocketMQ alike: what
 * only some brokers have is a capability or an optional field, never a required one.
 */
import type { Duration } from '../core/duration.js';
import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { Outcome } from '../core/outcome.js';
import type { DeadLetters } from './dead-letters.js';

/** Header carrying the producer's unique id of a send, kept across its retries (RocketMQ's `UNIQ_KEY`). */
export const UNIQUE_ID_HEADER = 'oncemq-unique-id';

/** What a transport can do natively. The core and the conformance suite branch on these, never on a name. */
export interface TransportCapabilities {
  /** Redelivers a retried message after `outcome.delayMs` (else the delay is approximated or zero). */
  readonly delay: boolean;
  /** Keeps dead-lettered messages with their reason: {@link Transport.deadLetters} lists, replays and purges them. */
  readonly deadLetter: boolean;
  /** Delivers messages of one ordering key one at a time, in publish order, retries included. */
  readonly ordering: boolean;
  /** Window in which the broker itself drops a republished copy of the same key; 0 when it has none. */
  readonly brokerDedupWindowMs: number;
  /** Transactional (half) messages with check-back. */
  readonly halfMessages: boolean;
  /** Hands several messages to the consumer at once (a pipeline's `processBatch` takes them). */
  readonly batch: boolean;
  /**
   * Keeps a delivery from going to another consumer while its handler runs past the broker's
   * visibility (every envelope carries a `keepAlive`); without it, a long handler's message may be
   * delivered again meanwhile, and the ledger absorbs that copy.
   */
  readonly keepAlive: boolean;
}

/** Capabilities a transport has unless it says otherwise. */
export const DEFAULT_TRANSPORT_CAPABILITIES: TransportCapabilities = Object.freeze({
  delay: false,
  deadLetter: false,
  ordering: false,
  brokerDedupWindowMs: 0,
  halfMessages: false,
  batch: false,
  keepAlive: false,
});

/** A message to publish. */
export interface OutgoingMessage {
  /** The topic (subject, stream) to publish to; each transport checks it against its broker's naming rules. */
  readonly topic: string;
  /** Bytes as they are, text as UTF-8, anything else as JSON. */
  readonly body: Uint8Array | string | object;
  /** The business key, carried in the `oncemq-key` header; keep it the same when you resend. */
  readonly key?: string;
  /** Messages with the same ordering key go to the same queue (partition, stream, message group). */
  readonly orderingKey?: string;
  /** More headers, sent as text; oncemq's own (`oncemq-*`) are set by the transport. @default none */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The broker's confirm of a stored message. What every broker has is required; where a broker
 * places the copy (queue, partition and offset, stream sequence, entry id) is in `position`.
 *
 * A receipt may carry more than this type names. The Kafka transport's also has `partition` (a
 * number) and `offset`, a `bigint` (Kafka offsets are 64-bit), so `JSON.stringify(receipt)` throws
 * `TypeError: Do not know how to serialize a BigInt`. To log or store a receipt, use `position`,
 * whose values are strings and numbers (Kafka's offset as a decimal string), or serialize with a
 * replacer that writes bigints as strings.
 *
 * @example
 * ```ts
 * const receipt = await transport.publish({ topic: 'payments', key: 'evt-1', body });
 * const json = JSON.stringify(receipt, (_key, value: unknown) =>
 *   typeof value === 'bigint' ? value.toString() : value,
 * );
 * ```
 */
export interface PublishReceipt {
  /** The broker's id of the stored copy the confirm was received for; envelopes of that copy carry it. */
  readonly brokerId: string;
  /** The topic the message was stored in. */
  readonly topic: string;
  /**
   * The producer's id of the send, the same for every copy that resends of it stored (RocketMQ's
   * `UNIQ_KEY`, the AMQP `message-id`, JetStream's `Nats-Msg-Id`), where the transport sets one.
   */
  readonly messageId?: string | undefined;
  /** True when the broker's own dedup window recognised the send as a copy and dropped it. */
  readonly duplicate?: boolean | undefined;
  /** Where the broker stored the copy, in its own terms: `{ queue }`, `{ partition, offset }`, `{ stream, seq }`. */
  readonly position?: Readonly<Record<string, string | number>> | undefined;
}

/**
 * Turns a delivery into an {@link Outcome}; a pipeline is one. The transport acts on `outcome.action`:
 * `ack`, `retry` after `delayMs` carrying `nextDeliveryCount`, or `dead-letter` with the reason.
 * Nothing is acked before that.
 */
export interface Processor {
  /**
   * Runs one delivery to its outcome; the transport settles the delivery by `outcome.action`. A
   * rejection is not the message's fault: the delivery stays unacked and comes again.
   */
  process(envelope: Envelope): Promise<Outcome>;
  /** Optional: processes a batch at once, one outcome per envelope in order. */
  processBatch?(envelopes: readonly Envelope[]): Promise<readonly Outcome[]>;
}

/** A pipeline, any object with `process`, or a bare function of the envelope. */
export type ProcessorLike = Processor | ((envelope: Envelope) => Promise<Outcome>);

/** Normalizes a {@link ProcessorLike}. */
export function toProcessor(target: ProcessorLike): Processor {
  if (typeof target === 'function') return { process: target };
  if (typeof (target as Partial<Processor> | null)?.process !== 'function') {
    throw new ConfigError(
      'processor',
      'expected a pipeline, an object with process(envelope), or a function',
    );
  }
  return target;
}

/** Where a message's ordering key comes from. */
export type OrderingKeySource =
  /** The envelope's `orderingKey` (the `oncemq-ordering-key` header oncemq's producers set). */
  'orderingKey' | { readonly header: string } | ((envelope: Envelope) => string | undefined);

/** Per-key ordered consumption: `subscribe(group, topics, pipeline, { ordering: { … } })`. */
export interface OrderingOptions {
  /** @default 'orderingKey' */
  readonly key?: OrderingKeySource;
  /**
   * When a message of a key has used up its retries: `dead-letter` it and let the key go on, or
   * `block` the key — the message is retried every `blockedRetryEvery` until it succeeds (an operator
   * fixes the cause), and the key's later messages wait. Permanent failures (a malformed body, a
   * conflict) are dead-lettered either way: no retry can make them succeed. @default 'dead-letter'
   */
  readonly onExhausted?: 'dead-letter' | 'block';
  /** How often a blocked key's message is tried again. @default '1m' */
  readonly blockedRetryEvery?: Duration;
  /**
   * What a member does when the group's recorded partition count differs from the count it is
   * configured with (where the transport partitions by a count it records): `refuse` to start, with a
   * `ConfigError` naming both counts; or `drain` — the member first consumes the partitions of the
   * recorded count until they hold nothing published before the change, in order, then records the new
   * count and consumes the new partitions, so a key's later messages never overtake its earlier ones.
   * Each transport's page says how it drains. @default 'refuse'
   */
  readonly onPartitionChange?: 'refuse' | 'drain';
}

/**
 * Where a group starts on a topic it has never consumed (`SubscribeOptions.from`):
 * - `earliest` — at the oldest message the broker still keeps for the topic: the group gets what was
 *   published before it existed, then everything after;
 * - `now` — after the last message published before its first `subscribe()` resolved: it gets every
 *   message published from then on, and none from before.
 *
 * Read only when the group has no position on the topic yet (its first subscribe to it); a group that
 * has one goes on from there whatever `from` says.
 */
export type StartPosition = 'now' | 'earliest';

/** Options every transport's `subscribe` understands; a transport documents how it maps each one. */
export interface SubscribeOptions {
  /**
   * Deliveries this subscription processes at the same time (RabbitMQ prefetch, JetStream
   * `max_ack_pending`, the entries read at once from a stream). @default 16
   */
  readonly concurrency?: number;
  /**
   * Most deliveries handed to `processBatch` at once, where the transport has the `batch` capability
   * and the processor has `processBatch`; 1 hands them one by one. @default the transport's pull size
   */
  readonly batchSize?: number;
  /**
   * How long the broker holds a delivery for this consumer before it may give it to another (ack
   * wait, visibility timeout, pending-entry idle time). Kept alive while a handler runs, where the
   * transport has the `keepAlive` capability. @default '30s'
   */
  readonly visibility?: Duration;
  /**
   * A stable name of this member of the group, where the broker names consumers (Redis Streams
   * consumer names, the local broker's instance name): a restarted member picks up what it left
   * pending. @default host and process id
   */
  readonly consumerName?: string;
  /**
   * Per-key ordered consumption, where the transport has the `ordering` capability (a transport
   * without it refuses the option): messages of one ordering key run one at a time in publish order,
   * different keys in parallel up to `concurrency`; a failing message is retried in place and blocks
   * only its key. @default unordered
   */
  readonly ordering?: OrderingOptions;
  /**
   * Where the group starts on a topic it has never consumed: `earliest` (what the broker still keeps
   * for the topic, then everything after) or `now` (only what is published after this `subscribe()`
   * resolved). Read only at the group's first subscribe to the topic: a group with a position keeps
   * it. A transport that cannot start a group at `earliest` (a RabbitMQ transport without topic logs,
   * an ordered group on RabbitMQ or Redis Streams) refuses it with a `ConfigError` on `from`.
   * @default 'earliest' where the transport can start there, else 'now' (docs/transports/contract.md)
   */
  readonly from?: StartPosition;
}

/** Defaults of {@link SubscribeOptions}. */
export const DEFAULT_SUBSCRIBE_OPTIONS = Object.freeze({
  /** Deliveries processed at once per subscription. */
  concurrency: 16,
  /** How long the broker holds a delivery for this consumer. */
  visibility: '30s',
} as const);

/**
 * Refuses `ordering` on a transport without the `ordering` capability: it cannot keep per-key order
 * (a retry queue reorders, members share keys), so ordered consumption is not pretended.
 */
export function refuseOrdering(transport: string, options: SubscribeOptions | undefined): void {
  if (options?.ordering !== undefined) {
    throw new ConfigError(
      'ordering',
      `the ${transport} transport cannot keep per-key order yet; subscribe without ordering, or use a transport with the ordering capability`,
    );
  }
}

/**
 * The start position a subscribe asked for (`options.from`), checked: anything but `now` or
 * `earliest` is a `ConfigError` on `from`. Unset, it is `earliest`. Where the transport cannot start a
 * group at the earliest message, pass why as `noEarliest`: an explicit `earliest` is refused with it,
 * and the default is `now`. For adapters: every transport reads `from` through it.
 */
export function startPosition(options: SubscribeOptions | undefined, noEarliest?: string): StartPosition {
  // Typed, but a caller in JavaScript (or a config file) may pass anything.
  const from = options?.from as unknown;
  if (from === undefined) return noEarliest === undefined ? 'earliest' : 'now';
  if (from !== 'now' && from !== 'earliest') {
    throw new ConfigError('from', `expected 'now' or 'earliest', got ${JSON.stringify(from)}`);
  }
  if (from === 'earliest' && noEarliest !== undefined) {
    throw new ConfigError('from', `${noEarliest}; subscribe with from: 'now'`);
  }
  return from;
}

/** A running subscription of one consumer (one member of the group). */
export interface Subscription {
  /** The consumer group this member joined. */
  readonly group: string;
  /** The topics it consumes. */
  readonly topics: readonly string[];
  /**
   * Stops taking deliveries, waits for the ones in progress to reach their outcome and be settled
   * at the broker (acked, retried or dead-lettered), then leaves the group.
   */
  close(): Promise<void>;
}

/**
 * A broker adapter: publishes with confirms, runs consumer groups that settle each delivery by its
 * outcome's `action`, and keeps dead letters. docs/transports/contract.md is the contract in prose.
 */
export interface Transport {
  /** Transport name, for logs and metrics. */
  readonly name: string;
  /** What the broker does natively; the conformance suite and the core branch on these, never on the name. */
  readonly capabilities: TransportCapabilities;
  /** Publishes and resolves once the broker confirmed that the message is stored. */
  publish(message: OutgoingMessage): Promise<PublishReceipt>;
  /**
   * Joins consumer group `group` on `topics` and drives `processor` with every delivery, acting on
   * each outcome's action. Several subscriptions of one group share the work; every group gets every
   * message.
   */
  subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options?: SubscribeOptions,
  ): Promise<Subscription>;
  /**
   * The dead-letter queue: list, replay, purge. Present on every transport; one without the
   * `deadLetter` capability answers every call with an error saying so.
   */
  readonly deadLetters: DeadLetters;
  /** Closes every subscription (draining them) and the connection. */
  close(): Promise<void>;
}
