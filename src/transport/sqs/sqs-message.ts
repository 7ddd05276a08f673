/**
 * How a message is sent to SQS: oncemq's headers and the producer's as message attributes, the body as
 * SQS text. SQS carries at most 10 message attributes and 256 KiB per message, a text body of XML
 * characters, and no empty attribute value: oncemq's headers go as String attributes of their own while
 * they fit, the rest packed as JSON in one attribute ({@link PACKED_HEADERS_ATTRIBUTE}); a body that is
 * not such text goes base64 with {@link BODY_ENCODING_HEADER}. The way back, a received record to an
 * envelope, is sqs-record.ts.
 */
import { createHash, randomUUID } from 'node:crypto';
import { encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { ConfigError } from '../../core/errors.js';
import { exactUtf8 } from '../../core/header-text.js';
import type { OutgoingMessage } from '../transport.js';

/** Most message attributes SQS stores on one message. */
export const SQS_MAX_ATTRIBUTES = 10;

/** Largest SQS message, body and attributes (names, types, values) together. */
export const SQS_MAX_MESSAGE_BYTES = 262_144;

/** The attribute holding, as a JSON object of text, the headers that have no attribute of their own. */
export const PACKED_HEADERS_ATTRIBUTE = 'oncemq-headers';

/** Header saying how the body is encoded in the SQS body: `base64`, or `empty` (SQS refuses an empty body). */
export const BODY_ENCODING_HEADER = 'oncemq-body-encoding';

/**
 * Header on a group queue's copy naming the topic log's message it is a copy of: the envelope's broker
 * id (the same in every group, and the publish receipt's); a message without it has its own SQS id.
 */
export const LOG_ID_HEADER = 'oncemq-log-id';

/** The SendMessage fields of one message (the queue URL, or a batch entry's `Id`, added by the caller). */
export interface SqsSendMessage {
  /** The body as SQS stores it (text, or base64 of bytes that are not XML text). */
  MessageBody: string;
  /** The message attributes: oncemq's headers and the producer's own. */
  MessageAttributes?: Record<string, SqsAttribute>;
  /** The FIFO message group: the ordering key. */
  MessageGroupId?: string;
  /** The FIFO deduplication id: the business key. */
  MessageDeduplicationId?: string;
  /** Seconds before the message can be received (standard queues). */
  DelaySeconds?: number;
}

/** A message attribute as SendMessage takes it: oncemq writes String ones; another producer's Number and Binary ones are kept. */
export interface SqsAttribute {
  DataType: string;
  StringValue?: string;
  BinaryValue?: Uint8Array;
}

/** `input` with `extra` attributes added where SQS's 10 leave room (oncemq's own never give way). */
export function withAttributes(input: SqsSendMessage, extra: Record<string, SqsAttribute>): SqsSendMessage {
  const attributes = { ...input.MessageAttributes };
  for (const [name, value] of Object.entries(extra)) {
    if (Object.keys(attributes).length >= SQS_MAX_ATTRIBUTES) break;
    attributes[name] ??= value;
  }
  return { ...input, MessageAttributes: attributes };
}

/** A message as SQS is to store it: every header as text (oncemq's included), and the body. */
export interface SqsSend {
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array | string | object;
  /** For a FIFO queue: the message group and the deduplication id. */
  readonly fifo?: { readonly groupId: string; readonly deduplicationId: string } | undefined;
  /** Seconds SQS hides the message before its first delivery (0 to 900; standard queues only). */
  readonly delaySeconds?: number | undefined;
}

/** Characters SQS takes in a body or an attribute value (XML 1.0 characters). */
// eslint-disable-next-line no-control-regex -- the control characters XML refuses are what this finds
const NOT_XML = /[^\u0009\u000A\u000D\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
const NOT_XML_GLOBAL = new RegExp(NOT_XML.source, 'gu');

/** Attribute names SQS takes: letters, digits, `_ - .`, no `..`, no leading or trailing `.`, not `AWS.`/`Amazon.`. */
function attributeName(name: string): boolean {
  return (
    /^[A-Za-z0-9_.-]{1,256}$/.test(name) &&
    !name.startsWith('.') &&
    !name.endsWith('.') &&
    !name.includes('..') &&
    !/^(aws\.|amazon\.)/i.test(name)
  );
}

/** Fields SQS takes as a FIFO group or deduplication id: 1 to 128 printable ASCII characters. */
const FIFO_ID = /^[!-~]{1,128}$/;

/** A FIFO id for `value`: as it is where SQS takes it, else the SHA-256 of its UTF-8 in hex. */
export function fifoId(value: string): string {
  return FIFO_ID.test(value) ? value : createHash('sha256').update(value, 'utf8').digest('hex');
}

/** JSON whose text SQS takes as an attribute value (characters XML refuses escaped as `\uXXXX`). */
function packHeaders(headers: Readonly<Record<string, string>>): string {
  return JSON.stringify(headers).replace(NOT_XML_GLOBAL, (char) => {
    let escaped = '';
    for (let index = 0; index < char.length; index++) {
      escaped += `\\u${char.charCodeAt(index).toString(16).padStart(4, '0')}`;
    }
    return escaped;
  });
}

/** oncemq's keys first (they stay attributes of their own), then its other headers, then the rest. */
function rank(name: string): number {
  if (name === KEY_HEADER || name === ORDERING_KEY_HEADER) return 0;
  return name.startsWith('oncemq-') ? 1 : 2;
}

/**
 * The message attributes of `headers`: each header as a String attribute while there are at most 10
 * with names and values SQS takes; otherwise the first 9 of those (oncemq's keys first) on their own and
 * every other header in {@link PACKED_HEADERS_ATTRIBUTE}.
 */
export function headerAttributes(
  headers: Readonly<Record<string, string>>,
): Record<string, { DataType: 'String'; StringValue: string }> {
  const names = Object.keys(headers).sort((a, b) => rank(a) - rank(b));
  for (const name of names) {
    if (typeof headers[name] !== 'string') {
      throw new ConfigError('headers', `header '${name}' must be text, got ${typeof headers[name]}`);
    }
  }
  const plain = names.filter((name) => {
    const value = headers[name] as string;
    return name !== PACKED_HEADERS_ATTRIBUTE && attributeName(name) && value !== '' && !NOT_XML.test(value);
  });
  const own = plain.length === names.length && plain.length <= SQS_MAX_ATTRIBUTES ? plain : plain.slice(0, 9);
  const attributes: Record<string, { DataType: 'String'; StringValue: string }> = {};
  for (const name of own) attributes[name] = { DataType: 'String', StringValue: headers[name] as string };
  if (own.length < names.length) {
    const packed: Record<string, string> = {};
    for (const name of names) if (attributes[name] === undefined) packed[name] = headers[name] as string;
    attributes[PACKED_HEADERS_ATTRIBUTE] = { DataType: 'String', StringValue: packHeaders(packed) };
  }
  return attributes;
}

/** The SendMessage fields of a message: its headers as attributes, its body as SQS text. */
export function sqsSendInput(send: SqsSend): SqsSendMessage {
  const bytes = encodeBody(send.body);
  const headers: Record<string, string> = { ...send.headers };
  Reflect.deleteProperty(headers, BODY_ENCODING_HEADER);
  let body: string;
  const text = typeof send.body === 'string' ? send.body : exactUtf8(bytes);
  if (bytes.length === 0) {
    headers[BODY_ENCODING_HEADER] = 'empty';
    body = '-';
  } else if (text !== undefined && !NOT_XML.test(text)) {
    body = text;
  } else {
    headers[BODY_ENCODING_HEADER] = 'base64';
    body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  }
  const input: SqsSendMessage = { MessageBody: body, MessageAttributes: headerAttributes(headers) };
  if (send.fifo !== undefined) {
    input.MessageGroupId = send.fifo.groupId;
    input.MessageDeduplicationId = send.fifo.deduplicationId;
  }
  if (send.delaySeconds !== undefined && send.delaySeconds > 0) input.DelaySeconds = send.delaySeconds;
  return input;
}

/** The headers a publish stores: its own, then the business key and the ordering key. */
export function publishHeaders(message: OutgoingMessage): Record<string, string> {
  const headers: Record<string, string> = { ...message.headers };
  if (message.key !== undefined) headers[KEY_HEADER] = message.key;
  const orderingKey = message.orderingKey ?? message.headers?.[ORDERING_KEY_HEADER];
  if (orderingKey !== undefined) headers[ORDERING_KEY_HEADER] = orderingKey;
  return headers;
}

/**
 * The SendMessage fields of a publish. On a FIFO queue the message group is the ordering key (else
 * the business key, else a fresh id: no order to keep) and the deduplication id the business key (else
 * a fresh id), each as `fifoId` makes it; `deduplicationId` overrides it (a replay's own id, which
 * the 5-minute window must not take for the original).
 */
export function sqsPublishInput(
  message: OutgoingMessage,
  options: { readonly fifo: boolean; readonly deduplicationId?: string | undefined },
): SqsSendMessage {
  const headers = publishHeaders(message);
  const key = headers[KEY_HEADER];
  const orderingKey = headers[ORDERING_KEY_HEADER];
  const fresh = options.fifo ? randomUUID() : '';
  return sqsSendInput({
    headers,
    body: message.body,
    fifo: options.fifo
      ? {
          groupId: fifoId(orderingKey ?? key ?? fresh),
          deduplicationId: fifoId(options.deduplicationId ?? key ?? fresh),
        }
      : undefined,
  });
}

/** Bytes SQS counts for a message: the body and every attribute's name, type and value, in UTF-8. */
export function sqsMessageBytes(input: SqsSendMessage): number {
  let bytes = Buffer.byteLength(input.MessageBody);
  for (const [name, value] of Object.entries(input.MessageAttributes ?? {})) {
    bytes +=
      Buffer.byteLength(name) +
      Buffer.byteLength(value.DataType) +
      (value.BinaryValue?.byteLength ?? Buffer.byteLength(value.StringValue ?? ''));
  }
  return bytes;
}
