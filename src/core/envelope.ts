/** Header in which oncemq's own producers (outbox relay, local broker) carry the business key. */
export const KEY_HEADER = 'oncemq-key';

/** Header in which oncemq's own producers carry the ordering key. */
export const ORDERING_KEY_HEADER = 'oncemq-ordering-key';

/**
 * Header in which transports carry {@link Envelope.deliveryCount} across delayed retries, where the
 * broker has no count of its own that means the same (RabbitMQ, NATS, Redis Streams, Kafka).
 */
export const DELIVERY_COUNT_HEADER = 'oncemq-delivery-count';

/**
 * The highest delivery count oncemq ever writes: a retry policy makes fewer delayed retries than this
 * (`RetryPolicy` refuses more), so a larger count was not written by oncemq.
 */
export const MAX_DELIVERY_COUNT = 10_000;

/**
 * Keeps one delivery at the broker while its handler runs: the broker must not hand it to another
 * consumer (JetStream `working()`, a visibility extension, a pending-entry refresh). The pipeline's
 * lease keeper calls {@link extend} every {@link everyMs} until the outcome is known.
 */
export interface DeliveryKeepAlive {
  /** How often to extend; the transport sets it well inside its visibility (ack wait). */
  readonly everyMs: number;
  /**
   * Extends the delivery. A rejection means the broker may redeliver it elsewhere: the ledger keeps
   * that copy from applying the effect twice (it waits for, or is refused by, the running claim).
   */
  extend(): Promise<void>;
}

/** A received message, as every transport hands it to the pipeline. */
export interface Envelope {
  /** The broker's id of this stored copy. Identifies a copy, never a business event. */
  readonly brokerId: string;
  /** The topic (subject, stream, queue name) the message was published to. */
  readonly topic: string;
  /**
   * The message's headers as exact text (AMQP headers, JetStream headers, Kafka record headers,
   * RocketMQ properties): the business key and the ordering key are read from here by default.
   */
  readonly headers: Readonly<Record<string, string>>;
  /** The message's bytes as the broker stored them; the pipeline's `decode` turns them into the message. */
  readonly body: Uint8Array;
  /**
   * oncemq's own attempt count, the one the retry policy reads: 1 on the first delivery, +1 for each
   * delayed retry the message was charged with, carried across retries by every transport. A `busy`
   * answer or an unreachable ledger is never charged (the redelivered copy keeps its count), and a
   * redelivery the broker makes on its own (a lost ack, a dropped connection) does not change it.
   */
  readonly deliveryCount: number;
  /**
   * The broker's raw count of deliveries of this copy, where it tells one (JetStream's
   * `num_delivered`, RabbitMQ's `x-delivery-count`, the pending-entry count of Redis Streams,
   * RocketMQ's delivery attempt). Information only: retries are decided on {@link deliveryCount}.
   */
  readonly brokerDeliveryCount?: number | undefined;
  /** When the first copy was published, where the broker tells. */
  readonly publishedAt?: Date | undefined;
  /** Messages with the same ordering key are processed one at a time, in order. */
  readonly orderingKey?: string | undefined;
  /** Set by transports whose broker must be told that a long handler is still running. */
  readonly keepAlive?: DeliveryKeepAlive | undefined;
  /**
   * Headers no business key is read from, each with what the broker carried: bytes that are not
   * UTF-8, a number past 2^53, a name sent twice with different values (those are not in
   * {@link headers}: they have no exact text), or a value that is text only by printing it (an AMQP
   * boolean or double, which stays in `headers`). A key source naming one is an `invalid-key` dead
   * letter, never a lossy reading that would make two different keys one.
   */
  readonly nonKeyHeaders?: Readonly<Record<string, string>> | undefined;
}

/** Input of {@link createEnvelope}: a body may be bytes, text, or a value to encode as JSON. */
export interface EnvelopeInit {
  /**
   * The broker's id of this stored copy (a message id, `partition:offset`, a stream entry id). The
   * pipeline tells a redelivery from a republished copy by it; it is never the business key.
   */
  brokerId: string;
  /** The topic the message was received from. */
  topic: string;
  /** Bytes as they are, text as UTF-8, anything else encoded as JSON (`encodeBody`). */
  body: Uint8Array | string | object;
  /** The message's headers as text. Copied and frozen. @default {} */
  headers?: Readonly<Record<string, string>>;
  /**
   * {@link Envelope.deliveryCount}: your consumer loop's own attempt count of this message, which the
   * retry policy reads; carry `outcome.nextDeliveryCount` on the copy you redeliver. @default 1
   */
  deliveryCount?: number;
  /** {@link Envelope.brokerDeliveryCount}: the broker's raw count, information only. @default undefined */
  brokerDeliveryCount?: number;
  /** {@link Envelope.publishedAt}: when the first copy was published. @default undefined */
  publishedAt?: Date;
  /** {@link Envelope.orderingKey}. @default the `oncemq-ordering-key` header, if present */
  orderingKey?: string;
  /** {@link Envelope.keepAlive}: how to keep the delivery at the broker while a handler runs. @default none */
  keepAlive?: DeliveryKeepAlive;
  /** {@link Envelope.nonKeyHeaders}: headers no key may be read from. @default none */
  nonKeyHeaders?: Readonly<Record<string, string>> | undefined;
}

const encoder = new TextEncoder();

/** Encodes a body the way oncemq's producers do: bytes as they are, text as UTF-8, anything else as JSON. */
export function encodeBody(body: Uint8Array | string | object): Uint8Array {
  if (body instanceof Uint8Array) return body;
  if (typeof body === 'string') return encoder.encode(body);
  return encoder.encode(JSON.stringify(body));
}

/**
 * Reads the delivery count a transport carried in {@link DELIVERY_COUNT_HEADER}: 1 when the header is
 * absent, not a whole number >= 1, or above {@link MAX_DELIVERY_COUNT} (a message from a producer
 * that is not oncemq's; transports dead-letter such a message with reason `invalid-header`).
 */
export function readDeliveryCount(headers: Readonly<Record<string, string | undefined>>): number {
  const text = headers[DELIVERY_COUNT_HEADER];
  if (text === undefined || !/^[1-9]\d{0,4}$/.test(text)) return 1;
  const count = Number(text);
  return count <= MAX_DELIVERY_COUNT ? count : 1;
}

/** Builds an {@link Envelope} for a message received by a consumer loop oncemq does not own. */
export function createEnvelope(init: EnvelopeInit): Envelope {
  return buildEnvelope(init, Object.freeze({ ...init.headers }), encodeBody(init.body));
}

/**
 * {@link createEnvelope} for a transport that has just made `headers` and `body` for this envelope
 * alone: the headers object is frozen and kept instead of copied.
 */
export function adoptEnvelope(
  init: EnvelopeInit & { headers: Record<string, string>; body: Uint8Array },
): Envelope {
  return buildEnvelope(init, Object.freeze(init.headers), init.body);
}

function buildEnvelope(
  init: EnvelopeInit,
  headers: Readonly<Record<string, string>>,
  body: Uint8Array,
): Envelope {
  return Object.freeze({
    brokerId: init.brokerId,
    topic: init.topic,
    headers,
    body,
    deliveryCount: init.deliveryCount ?? 1,
    brokerDeliveryCount: init.brokerDeliveryCount,
    publishedAt: init.publishedAt,
    orderingKey: init.orderingKey ?? headers[ORDERING_KEY_HEADER],
    keepAlive: init.keepAlive,
    nonKeyHeaders: init.nonKeyHeaders,
  });
}
