import { isUtf8 } from 'node:buffer';
import type { Message } from '@platformatic/kafka';
import {
  adoptEnvelope,
  KEY_HEADER,
  ORDERING_KEY_HEADER,
  readDeliveryCount,
  type Envelope,
} from '../../core/envelope.js';
import { checkDeliveryCount, checkNamedTopic, checkRetryDue, type HeaderFault } from '../header-guard.js';
import { UNIQUE_ID_HEADER } from '../transport.js';
import { ConfigError } from '../../core/errors.js';
import { HeaderText, NON_KEY } from '../../core/header-text.js';
import { kafkaBrokerId, ORIGINAL_TOPIC_HEADER, RETRY_DUE_HEADER } from './kafka-names.js';

/** A record as the consumer hands it over (keys, values and headers as bytes). */
export type KafkaMessage = Message;

/**
 * Header values as text, for oncemq's own headers (a record from another producer may carry bytes that
 * are not UTF-8: kept as decoded). What the envelope shows is read exactly by {@link readHeaderText}.
 */
export function readHeaders(message: KafkaMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  // forEach, not for…of: no iterator and no entry array per header of every record read.
  message.headers.forEach((value, name) => {
    // A header without a value comes as null from some producers, whatever the client's types say.
    const bytes = value as Buffer | null;
    headers[name.toString('utf8')] = bytes === null ? '' : bytes.toString('utf8');
  });
  return headers;
}

/**
 * The headers of a record read exactly: a value whose bytes are not UTF-8, or a name the record
 * carries twice with different values (Kafka allows both), is no header text and no business key.
 */
export function readHeaderText(message: KafkaMessage): HeaderText {
  const text = new HeaderText();
  message.headers.forEach((value, name) => {
    const bytes = value as Buffer | null;
    const decoded = bytes === null ? '' : bytes.toString('utf8');
    // toString replaces bytes that are not UTF-8 with U+FFFD: only then is the exact check needed.
    if (bytes !== null && decoded.includes('\uFFFD') && !isUtf8(bytes)) {
      text.drop(name.toString('utf8'), NON_KEY.notUtf8);
    } else text.text(name.toString('utf8'), decoded);
  });
  return text;
}

/**
 * The headers of a record that are not in its envelope's text headers (see {@link readHeaderText}),
 * as the record carries them, every value of a repeated name included: a retry or dead-letter copy
 * stores them again.
 */
export function unreadHeaders(
  message: KafkaMessage,
  envelope: Pick<Envelope, 'headers' | 'nonKeyHeaders'>,
): [Buffer, Buffer][] | undefined {
  if (envelope.nonKeyHeaders === undefined) return undefined;
  const raw: [Buffer, Buffer][] = [];
  message.headers.forEach((value, name) => {
    const text = name.toString('utf8');
    if (envelope.headers[text] === undefined && envelope.nonKeyHeaders?.[text] !== undefined) {
      // A header without a value comes as null from some producers, whatever the client's types say.
      const bytes = value as Buffer | null;
      raw.push([name, bytes === null ? Buffer.alloc(0) : bytes]);
    }
  });
  return raw;
}

/** Headers as the producer sends them. */
export function writeHeaders(headers: Readonly<Record<string, string>>): Map<Buffer, Buffer> {
  const map = new Map<Buffer, Buffer>();
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') {
      throw new ConfigError('headers', `header '${name}' must be text, got ${typeof value}`);
    }
    map.set(Buffer.from(name, 'utf8'), Buffer.from(value, 'utf8'));
  }
  return map;
}

/** The value of a record; a tombstone (no value) as no bytes, whatever the client's types say. */
export function bytesOf(message: KafkaMessage): Buffer {
  const value: unknown = message.value;
  return Buffer.isBuffer(value) ? value : Buffer.alloc(0);
}

/**
 * When a copy in a retry topic is due, in milliseconds since the epoch (0: at once). A due time
 * oncemq never writes (not epoch milliseconds, or later than any retry is scheduled) is due at once,
 * and {@link kafkaHeaderCheck} dead-letters the record: a retry tier's partition never waits on it.
 */
export function dueAt(headers: Readonly<Record<string, string>>): number {
  const value = headers[RETRY_DUE_HEADER];
  return value === undefined || checkRetryDue(RETRY_DUE_HEADER, value) !== undefined ? 0 : Number(value);
}

/** `oncemq-unique-id` as oncemq's Kafka publisher writes it: a UUID. */
const UNIQUE_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The `oncemq-*` headers a Kafka subscription of `topics` reads, checked as the transport writes them:
 * the delivery count, a retry copy's due time and original topic (one of the group's: a record of the
 * subscribed topics is of its own topic), and the unique id (whose presence makes the record key the
 * business key, so a value oncemq never writes must not do that).
 */
export function kafkaHeaderCheck(topics: readonly string[]): (envelope: Envelope) => HeaderFault | undefined {
  return (envelope) => {
    const { headers } = envelope;
    const unique = headers[UNIQUE_ID_HEADER];
    return (
      checkDeliveryCount(headers) ??
      checkRetryDue(RETRY_DUE_HEADER, headers[RETRY_DUE_HEADER]) ??
      checkNamedTopic(ORIGINAL_TOPIC_HEADER, envelope.topic, topics) ??
      (unique === undefined || UNIQUE_ID_PATTERN.test(unique)
        ? undefined
        : {
            header: UNIQUE_ID_HEADER,
            value: unique,
            why: "is not a UUID, as oncemq's Kafka publisher writes it",
          })
    );
  };
}

/**
 * The envelope of a record. A copy read from a retry tier is presented as a delivery of the topic it
 * was first published to (its broker id stays the retry topic's record, which it is).
 */
export function kafkaEnvelope(message: KafkaMessage, fromRetryTier: boolean): Envelope {
  const { headers, nonKey } = readHeaderText(message);
  // oncemq's publisher leaves the business key in the record key alone when there is no ordering key
  // (one header less on every record to store, fetch and decode). A record of another producer (no
  // unique id header) never has its record key taken for the business key: it may be an entity id.
  if (
    headers[KEY_HEADER] === undefined &&
    nonKey?.[KEY_HEADER] === undefined &&
    headers[ORDERING_KEY_HEADER] === undefined &&
    headers[UNIQUE_ID_HEADER] !== undefined &&
    UNIQUE_ID_PATTERN.test(headers[UNIQUE_ID_HEADER])
  ) {
    const key = message.key as Buffer | null | undefined;
    if (key !== null && key !== undefined && key.length > 0) headers[KEY_HEADER] = key.toString('utf8');
  }
  const value = bytesOf(message);
  const published = Number(message.timestamp);
  return adoptEnvelope({
    brokerId: kafkaBrokerId(message.topic, message.partition, message.offset),
    topic: fromRetryTier ? (headers[ORIGINAL_TOPIC_HEADER] ?? message.topic) : message.topic,
    headers,
    body: new Uint8Array(value.buffer, value.byteOffset, value.byteLength),
    deliveryCount: readDeliveryCount(headers),
    publishedAt: Number.isFinite(published) && published > 0 ? new Date(published) : undefined,
    nonKeyHeaders: nonKey,
  });
}
