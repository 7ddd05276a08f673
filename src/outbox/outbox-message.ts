import { randomUUID } from 'node:crypto';
import { encodeBody } from '../core/envelope.js';
import { PermanentError } from '../core/errors.js';
import { MAX_OUTBOX_NAME_LENGTH } from './outbox-schema.js';

/** A message written to the outbox; the relay publishes it with these fields unchanged. */
export interface OutboxMessage {
  /** The topic the relay publishes to. */
  readonly topic: string;
  /** The business key, sent unchanged in the `oncemq-key` header: consumers absorb a re-publish by it. */
  readonly key: string;
  /** Messages of one ordering key are published one after another, in the order their transactions committed. */
  readonly orderingKey?: string;
  /** More headers, sent as they are. @default none */
  readonly headers?: Readonly<Record<string, string>>;
  /** Bytes as they are, text as UTF-8, anything else as JSON. */
  readonly body: Uint8Array | string | object;
}

/** A message as it is stored: checked, its body encoded, with the unique id of this row. */
export interface StoredOutboxMessage {
  readonly messageId: string;
  readonly topic: string;
  readonly key: string;
  readonly orderingKey: string | null;
  readonly headers: string;
  readonly body: Buffer;
}

function invalid(field: string, problem: string): PermanentError {
  return new PermanentError('invalid', `outbox message ${field}: ${problem}`);
}

function name(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '') throw invalid(field, 'must be a non-empty string');
  if (value.length > MAX_OUTBOX_NAME_LENGTH) {
    throw invalid(field, `is ${value.length} characters long; at most ${MAX_OUTBOX_NAME_LENGTH}`);
  }
  return value;
}

/**
 * Checks a message before it is written: a bad one is refused with a PermanentError naming the
 * field, in the caller's transaction, before anything is stored (nothing half-written to send later).
 */
export function storedOutboxMessage(input: OutboxMessage): StoredOutboxMessage {
  // Checked as what a JavaScript caller may really pass.
  const message = input as Partial<Record<keyof OutboxMessage, unknown>> | null;
  if (message === null || typeof message !== 'object') throw invalid('message', 'must be an object');
  const topic = name(message.topic, 'topic');
  if (typeof message.key !== 'string' || message.key === '')
    throw invalid('key', 'must be a non-empty string');
  const orderingKey = message.orderingKey === undefined ? null : name(message.orderingKey, 'orderingKey');
  const headers = (message.headers ?? {}) as Record<string, unknown> | null;
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
    throw invalid('headers', 'must be an object of strings');
  }
  for (const [header, value] of Object.entries(headers)) {
    if (typeof value !== 'string') throw invalid(`headers.${header}`, 'must be a string');
  }
  if (message.body === undefined || message.body === null) throw invalid('body', 'is missing');
  let body: Uint8Array;
  try {
    body = encodeBody(message.body);
  } catch (error) {
    throw new PermanentError('invalid', 'outbox message body: cannot be encoded as JSON', { cause: error });
  }
  return {
    messageId: randomUUID(),
    topic,
    key: message.key,
    orderingKey,
    headers: JSON.stringify(headers),
    body: Buffer.from(body.buffer, body.byteOffset, body.byteLength),
  };
}
