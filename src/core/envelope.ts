/** Header in which oncemq's own producers (outbox relay, local broker) carry the business key. */
export const KEY_HEADER = 'oncemq-key';

/** Header in which oncemq's own producers carry the ordering key. */
export const ORDERING_KEY_HEADER = 'oncemq-ordering-key';

/** A received message, as every transport hands it to the pipeline. */
export interface Envelope {
  /** The broker's id of this stored copy. Identifies a copy, never a business event. */
  readonly brokerId: string;
  readonly topic: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
  /** 1 on the first delivery of this copy, +1 for each redelivery the broker counted. */
  readonly deliveryCount: number;
  /** When the first copy was published, where the broker tells. */
  readonly publishedAt?: Date | undefined;
  /** Messages with the same ordering key are processed one at a time, in order. */
  readonly orderingKey?: string | undefined;
}

/** Input of {@link createEnvelope}: a body may be bytes, text, or a value to encode as JSON. */
export interface EnvelopeInit {
  brokerId: string;
  topic: string;
  body: Uint8Array | string | object;
  headers?: Readonly<Record<string, string>>;
  deliveryCount?: number;
  publishedAt?: Date;
  orderingKey?: string;
}

const encoder = new TextEncoder();

/** Encodes a body the way oncemq's producers do: bytes as they are, text as UTF-8, anything else as JSON. */
export function encodeBody(body: Uint8Array | string | object): Uint8Array {
  if (body instanceof Uint8Array) return body;
  if (typeof body === 'string') return encoder.encode(body);
  return encoder.encode(JSON.stringify(body));
}

/** Builds an {@link Envelope} for a message received by a consumer loop oncemq does not own. */
export function createEnvelope(init: EnvelopeInit): Envelope {
  return Object.freeze({
    brokerId: init.brokerId,
    topic: init.topic,
    headers: Object.freeze({ ...init.headers }),
    body: encodeBody(init.body),
    deliveryCount: init.deliveryCount ?? 1,
    publishedAt: init.publishedAt,
    orderingKey: init.orderingKey ?? init.headers?.[ORDERING_KEY_HEADER],
  });
}
