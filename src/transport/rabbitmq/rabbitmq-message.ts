import { createHash, randomUUID } from 'node:crypto';
import {
  createEnvelope,
  DELIVERY_COUNT_HEADER,
  readDeliveryCount,
  type DeliveryKeepAlive,
  type Envelope,
} from '../../core/envelope.js';
import { checkDeliveryCount, checkNamedTopic, checkRetryDue, type HeaderCheck } from '../header-guard.js';
import { HeaderText, NON_KEY } from '../../core/header-text.js';
import type { AmqpHeaders, AmqpMessageLike, AmqpPublishOptions } from './rabbitmq-driver.js';

/** Header carrying the topic, which a retry copy's routing key (its work queue) no longer shows. */
export const TOPIC_HEADER = 'oncemq-topic';

/** Header of a retry copy: when it is due (epoch ms), for delays longer than the longest level. */
export const RETRY_DUE_HEADER = 'oncemq-retry-due';

/** Header of a dead-letter copy: the work queue it was taken from. */
export const ORIGINAL_QUEUE_HEADER = 'oncemq-original-queue';

/** Header of the marker a group's back-fill publishes into a topic's log to know where to stop. */
export const LOG_FENCE_HEADER = 'oncemq-log-fence';

/** A new broker id: the AMQP `message-id` of one stored copy. */
export const newBrokerId = (): string => randomUUID();

/**
 * The broker id of a delivered copy: its AMQP `message-id`, which oncemq stamps on every copy it
 * stores and the broker keeps on every redelivery. A message from another producer without one
 * gets a digest of its routing key, its headers (less those the broker adds on a redelivery) and its
 * body: the same on each redelivery, different for two messages that differ in any of them (two
 * messages equal in all three cannot be told apart, and count as one copy).
 */
export function brokerIdOf(message: AmqpMessageLike): string {
  const id = message.properties.messageId;
  if (typeof id === 'string' && id !== '') return id;
  const digest = createHash('sha256').update(message.fields.routingKey).update('\0');
  const headers = message.properties.headers ?? {};
  for (const name of Object.keys(headers).sort()) {
    if (BROKER_HEADERS.has(name) || name.startsWith('x-death') || DEATH_HEADER.test(name)) continue;
    digest.update(JSON.stringify([name, canonical(headers[name])])).update('\0');
  }
  return `amqp-sha256:${digest.update(message.content).digest('hex').slice(0, 32)}`;
}

/** Headers RabbitMQ adds when it dead-letters a message (`x-death` is in the check above). */
const DEATH_HEADER = /^x-(first|last)-death-/;

/** A header value in one spelling: tables with sorted names, bytes and numbers tagged by type. */
function canonical(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return { bytes: value.toString('base64') };
  if (typeof value === 'bigint') return { bigint: value.toString() };
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    const table = value as Record<string, unknown>;
    return Object.keys(table)
      .sort()
      .map((name) => [name, canonical(table[name])]);
  }
  return value;
}

/** What an AMQP table value that is no text is, for a dead letter's reason. */
function amqpKind(value: unknown): string {
  if (value === null) return 'an AMQP void (no value)';
  if (Array.isArray(value)) return 'an AMQP array';
  const tagged = (value as { readonly '!'?: unknown })['!'];
  return typeof tagged === 'string' ? `an AMQP ${tagged}` : 'an AMQP table';
}

/** One AMQP header value as text: a string as it is, a number or boolean printed, bytes as UTF-8. */
function textValue(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  return undefined;
}

/**
 * AMQP headers as text, each read exactly or not at all: strings as they are, integers within ±2^53 - 1
 * printed, bytes when they are UTF-8. A long past 2^53 (amqplib hands it over rounded) or bytes that are
 * not UTF-8 are left out; booleans and doubles are printed but are no key; tables, arrays, timestamps
 * and decimals are left out here (the raw headers keep them for dead letters). Every header that is
 * no key is named in `nonKey`, so that a business key read from it is refused.
 */
export function textHeaders(raw: AmqpHeaders | undefined): HeaderText {
  const text = new HeaderText();
  if (raw === undefined) return text;
  for (const [name, value] of Object.entries(raw)) {
    if (typeof value === 'string') text.text(name, value);
    else if (typeof value === 'number') {
      if (Number.isSafeInteger(value)) text.text(name, String(value));
      else if (Number.isInteger(value)) text.drop(name, NON_KEY.inexactNumber);
      else text.textNotKey(name, String(value), 'an AMQP float or double');
    } else if (typeof value === 'bigint') text.text(name, value.toString());
    else if (typeof value === 'boolean') text.textNotKey(name, String(value), 'an AMQP boolean');
    else if (Buffer.isBuffer(value)) text.bytes(name, value);
    else text.drop(name, amqpKind(value));
  }
  return text;
}

/** Quorum queues count the earlier deliveries of a copy in `x-delivery-count`. */
function brokerDeliveryCount(message: AmqpMessageLike): number {
  const raw = message.properties.headers?.['x-delivery-count'];
  const earlier = typeof raw === 'number' ? raw : Number(raw ?? 0);
  return Number.isFinite(earlier) ? earlier + 1 : 1;
}

/**
 * The topic of a delivery: a copy oncemq stored in a queue of its own through the default exchange (a
 * retry, a replay, a back-fill) names it in {@link TOPIC_HEADER}; a message routed by the exchange was
 * published to its routing key, whatever its header says (a header naming another topic is a fault,
 * see {@link rabbitHeaderCheck}).
 */
function topicOf(message: AmqpMessageLike, headers: Readonly<Record<string, string>>): string {
  if (message.fields.exchange !== '') return message.fields.routingKey;
  return headers[TOPIC_HEADER] ?? message.fields.routingKey;
}

/** The envelope of a delivery. */
export function toEnvelope(message: AmqpMessageLike, keepAlive?: DeliveryKeepAlive): Envelope {
  const { headers, nonKey } = textHeaders(message.properties.headers);
  const timestamp = message.properties.timestamp;
  return createEnvelope({
    brokerId: brokerIdOf(message),
    topic: topicOf(message, headers),
    headers,
    body: new Uint8Array(message.content.buffer, message.content.byteOffset, message.content.byteLength),
    deliveryCount: readDeliveryCount(headers),
    brokerDeliveryCount: brokerDeliveryCount(message),
    // AMQP timestamps are seconds.
    ...(typeof timestamp === 'number' ? { publishedAt: new Date(timestamp * 1000) } : {}),
    ...(keepAlive === undefined ? {} : { keepAlive }),
    nonKeyHeaders: nonKey,
  });
}

/** Headers the broker adds on its hops; a copy oncemq stores again does not repeat them as its own. */
const BROKER_HEADERS = new Set(['x-delivery-count', 'x-stream-offset']);

/**
 * Publish options of a new stored copy of `message` (a retry, a dead letter, a replay, a back-fill):
 * a new broker id, the same body properties and publish time, the raw headers (with `x-death`)
 * plus `headers`, minus the names in `drop`.
 */
export function copyOptions(
  message: AmqpMessageLike,
  headers: Readonly<Record<string, string | number>>,
  drop: ReadonlySet<string> = new Set(),
): AmqpPublishOptions & { messageId: string } {
  const merged: AmqpHeaders = {};
  for (const [name, value] of Object.entries(message.properties.headers ?? {})) {
    if (!BROKER_HEADERS.has(name) && !drop.has(name)) merged[name] = value;
  }
  Object.assign(merged, headers);
  const p = message.properties;
  return {
    messageId: newBrokerId(),
    headers: merged,
    ...(p.timestamp === undefined ? {} : { timestamp: p.timestamp }),
    ...(p.contentType === undefined ? {} : { contentType: p.contentType }),
    ...(p.contentEncoding === undefined ? {} : { contentEncoding: p.contentEncoding }),
    ...(p.correlationId === undefined ? {} : { correlationId: p.correlationId }),
    ...(p.type === undefined ? {} : { type: p.type }),
    ...(p.appId === undefined ? {} : { appId: p.appId }),
  };
}

/** The headers of a retry copy: its charged delivery count, its topic, and its due time. */
export function retryHeaders(
  envelope: Envelope,
  nextDeliveryCount: number,
  dueAt: number,
): Record<string, string> {
  return {
    [DELIVERY_COUNT_HEADER]: String(nextDeliveryCount),
    [TOPIC_HEADER]: envelope.topic,
    [RETRY_DUE_HEADER]: String(dueAt),
  };
}

/** When a retry copy is due, if it carries a valid due time (an invalid one is dead-lettered, not parked). */
export function retryDue(message: AmqpMessageLike, now = Date.now()): number | undefined {
  const value = textValue(message.properties.headers?.[RETRY_DUE_HEADER]);
  if (value === undefined) return undefined;
  return checkRetryDue(RETRY_DUE_HEADER, value, now) === undefined ? Number(value) : undefined;
}

/**
 * The `oncemq-*` headers a RabbitMQ subscription of `topics` reads, checked as the transport writes
 * them: the delivery count, a retry copy's due time, and its topic (one of the group's topics, and the
 * routing key it was published with when routed by the exchange).
 */
export function rabbitHeaderCheck(topics: readonly string[]): HeaderCheck {
  return (envelope) => {
    const { headers } = envelope;
    const named = headers[TOPIC_HEADER];
    const topicFault =
      named !== undefined && named !== envelope.topic
        ? {
            header: TOPIC_HEADER,
            value: named,
            why: `names another topic than '${envelope.topic}', the one it was published to`,
          }
        : checkNamedTopic(TOPIC_HEADER, named, topics);
    return (
      checkDeliveryCount(headers) ?? checkRetryDue(RETRY_DUE_HEADER, headers[RETRY_DUE_HEADER]) ?? topicFault
    );
  };
}
