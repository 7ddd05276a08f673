import { randomUUID } from 'node:crypto';
import { KEY_HEADER, type Envelope } from '../core/envelope.js';
import type { Outcome } from '../core/outcome.js';
import type { SubscribeOptions, Subscription, Transport } from '../transport/transport.js';

/** A transport made fresh for one conformance case, with the hooks its broker allows. */
export interface TransportUnderTest {
  /** The transport under test, fresh for this case, in a namespace of its own. */
  readonly transport: Transport;
  /**
   * Breaks the connections of the given subscriptions (and the transport's own) the way a network
   * fault would — through a TCP proxy between client and broker, never by stopping a shared broker;
   * for the local broker, the members crash and rejoin. The transport must recover on its own.
   */
  readonly dropConnections?: (subscriptions: readonly Subscription[]) => Promise<void>;
  /**
   * Why a cut cannot lose an ack sent after it, where it cannot: the ack is a call of its own that the
   * client sends on a new connection, and the handle it names is not bound to the one cut (SQS: each
   * call is an HTTP request, and a receipt handle outlives the connection it came on). The lost-ack case
   * skips saying this; the other cut cases run. Absent: the lost-ack case runs with `dropConnections`.
   */
  readonly acksOutliveCuts?: string;
  /**
   * Another transport on the same broker and in the same namespace as `transport`, with clients of its
   * own, as another process of the application would have: cases whose members of one group must not
   * share clients (racing to create what a new group needs) subscribe through peers. The case closes
   * what it makes, before `transport` is closed. Without it, the members share `transport`.
   */
  readonly peer?: () => Promise<Transport>;
  /**
   * A transport on the same broker in another namespace than `transport`, made as another application
   * sharing the broker would make it: its own value of the transport's namespace setting (a RabbitMQ
   * `prefix`, NATS stream and subject prefixes, a Redis Streams key `prefix`, a Kafka or RocketMQ
   * `namespace`; the local broker's namespace is its file), and no setting that only an operator who
   * knows of the other application would add (no RabbitMQ `exchange` of its own). The isolation case
   * publishes, retries and dead-letters in both under the same topic and group names, and expects each
   * to see only its own; it closes what it makes, and the factory's `cleanup` removes what that
   * transport left on the broker. Without it, the case skips.
   */
  readonly otherNamespace?: () => Promise<Transport>;
  /**
   * The largest message, headers and body together, the broker stores as the factory configured it
   * (NATS `max_payload` or a stream's `max_msg_size`, Kafka's `max.message.bytes`). Absent where the
   * broker has no limit a test can reach (Redis Streams, the local broker): the limit cases skip.
   */
  readonly maxMessageBytes?: number;
  /**
   * The largest header block the broker (or its client) takes, where it is smaller than the message
   * limit (RabbitMQ: amqplib's 64 KiB header table, within one `frame_max` frame); else `maxMessageBytes`
   * is the headers' limit too. Absent with `maxMessageBytes` absent: the header case skips.
   */
  readonly maxHeaderBytes?: number;
  /** Runs after the transport is closed: removes what the case created. */
  readonly cleanup?: () => Promise<void> | void;
  /**
   * Publishes as a producer that is not oncemq's would, with the broker's own client: the foreign
   * message cases run where the factory gives this.
   */
  readonly foreign?: ForeignProducer;
  /**
   * How the broker sets the partition count an ordered group is consumed over: the partition-count
   * cases run where the factory gives this. Without it, they skip (the broker keeps no count of a
   * group that a member configures: a RocketMQ FIFO topic orders by message group on the broker).
   */
  readonly partitionCounts?: PartitionCounts;
}

/**
 * The partition count of an ordered group, as the broker expresses it: a transport setting (NATS,
 * Redis Streams and RabbitMQ `partitions`, the local broker's `queues`) or the topic's own partitions
 * (Kafka). A member with another count would move ordering keys between partitions while their earlier
 * messages wait in the old ones: it is refused, or, with `ordering.onPartitionChange: 'drain'`, moves
 * the group over once the old partitions are drained.
 */
export interface PartitionCounts {
  /** The count a new ordered group of the factory's `transport` is consumed over. */
  readonly count: number;
  /**
   * Another member of the same namespace, with clients of its own as another process would have, that
   * consumes `topic` over `count` partitions: a transport configured with `count`, or, where the count is
   * the topic's own (Kafka), a fresh transport once the topic has grown to `count`. The cases ask only
   * for a larger count than {@link count} (a Kafka topic only grows) and close what they get.
   */
  member(topic: string, count: number): Promise<Transport>;
  /** The `ConfigError` field of the refusal: the broker's count setting or option. @default 'partitions' */
  readonly field?: string;
  /**
   * Whether a member on the recorded count is taken again after another count was refused; false where
   * the other count is the topic's own and stays (a grown Kafka topic). @default true
   */
  readonly reversible?: boolean;
  /**
   * Why the broker cannot move a group to another count, where it cannot (the local broker keeps a
   * topic's queue count for its life): a member asking for a drain is refused too, and the drain case
   * skips saying this.
   */
  readonly fixed?: string;
}

/** A header value as another producer sets it, in one of the types a broker's client can carry. */
export type ForeignHeaderValue =
  | {
      /** A text header (AMQP long string, a NATS header, a RocketMQ property). */
      readonly type: 'text';
      /** The text. */
      readonly value: string;
    }
  | {
      /** Raw bytes (AMQP byte array, a Kafka header, a Redis Streams field), UTF-8 or not. */
      readonly type: 'bytes';
      /** The bytes. */
      readonly value: Uint8Array;
    }
  | {
      /** A signed 64-bit integer (AMQP `l`). */
      readonly type: 'integer';
      /** The integer. */
      readonly value: bigint;
    }
  | {
      /** A double (AMQP `d`). */
      readonly type: 'float';
      /** The number. */
      readonly value: number;
    }
  | {
      /** A boolean (AMQP `t`). */
      readonly type: 'boolean';
      /** The boolean. */
      readonly value: boolean;
    };

/** The `type` of a {@link ForeignHeaderValue}: `text`, `bytes`, `integer`, `float` or `boolean`. */
export type ForeignHeaderType = ForeignHeaderValue['type'];

/** A message as another producer stores it: these headers (each name once, or several times) and this body. */
export interface ForeignMessage {
  /** Header name and value; a name with several values is sent once per value, where the broker allows it. */
  readonly headers: readonly (readonly [string, ForeignHeaderValue])[];
  /** The body, as bytes. */
  readonly body: Uint8Array;
}

/** The broker's own client, publishing as a foreign producer would. */
export interface ForeignProducer {
  /** Header value types the broker's client can carry; the cases send only these. */
  readonly headerTypes: readonly ForeignHeaderType[];
  /** Whether one message can carry the same header name twice (NATS, Kafka, Redis Streams fields). */
  readonly repeatedHeaders: boolean;
  /**
   * Stores one message on `topic` where the transport's subscribers of that topic read it, with exactly
   * these headers (no oncemq header but those given); resolves once the broker confirmed it.
   */
  publish(topic: string, message: ForeignMessage): Promise<void>;
}

/** Makes a fresh transport for one test. */
export type TransportFactory = () => Promise<TransportUnderTest>;

export interface TransportConformanceOptions {
  /** Subscribe options of every case (a short `visibility` keeps the keep-alive case quick). */
  readonly subscribe?: SubscribeOptions;
  /** Longest wait for an expected delivery. @default 20_000 */
  readonly waitMs?: number;
  /** Delay of the retries the suite asks for, in milliseconds. @default 300 */
  readonly retryDelayMs?: number;
}

export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  limitMs: number,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting ${limitMs}ms for ${what}`);
    await sleep(10);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A short random suffix, so that cases never see each other's topics and groups. */
export const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;

export const keyOf = (envelope: Envelope): string | undefined => envelope.headers[KEY_HEADER];

/** What the conformance processor answers for one delivery. */
export type Answer =
  | 'ack'
  /** A failed handler: retried after the suite's delay, charged one delivery. */
  | 'retry'
  /** A busy key or an unreachable ledger: retried after the suite's delay, not charged. */
  | 'retry-uncharged'
  | 'dead-letter';

/** The outcome a pipeline would give, built by hand: the transport conformance needs no ledger. */
export function outcomeFor(envelope: Envelope, answer: Answer, delayMs: number): Outcome {
  const base = {
    group: 'conformance',
    key: keyOf(envelope) ?? null,
    topic: envelope.topic,
    brokerId: envelope.brokerId,
    deliveryCount: envelope.deliveryCount,
    elapsedMs: 0,
  };
  switch (answer) {
    case 'ack':
      return {
        ...base,
        kind: 'executed',
        action: 'ack',
        mode: 'transactional',
        attempt: 1,
        reclaimed: false,
        leaseLost: false,
      };
    case 'retry':
    case 'retry-uncharged':
      return {
        ...base,
        kind: 'retry',
        action: 'retry',
        delayMs,
        nextDeliveryCount: envelope.deliveryCount + (answer === 'retry' ? 1 : 0),
        reconsumeTimes: envelope.deliveryCount - 1,
        error: new Error(answer === 'retry' ? 'conformance: handler failed' : 'conformance: ledger away'),
      };
    case 'dead-letter':
      return {
        ...base,
        kind: 'dead',
        action: 'dead-letter',
        reason: 'permanent-error',
        error: new Error('conformance: poison\non two lines'),
      };
  }
}
