/**
 * How a received SQS message maps to an {@link Envelope}: the record normalised from whichever shape
 * carried it (the SDK's `ReceiveMessage` answer here, a Lambda event record in sqs-lambda-event.ts), its
 * attributes read back as headers, its body decoded. A message of another producer (a plain body, its
 * own attributes) maps too: its String attributes are headers, Number ones are headers where they are
 * exact integers, and Binary ones are headers where their bytes are UTF-8.
 */
import {
  adoptEnvelope,
  readDeliveryCount,
  type DeliveryKeepAlive,
  type Envelope,
} from '../../core/envelope.js';
import { HeaderText, NON_KEY } from '../../core/header-text.js';
import {
  BODY_ENCODING_HEADER,
  LOG_ID_HEADER,
  PACKED_HEADERS_ATTRIBUTE,
  type SqsAttribute,
} from './sqs-message.js';

/** A message attribute that is not a String: a Number or Binary one (custom type suffixes included). */
export interface SqsAttributeValue {
  /** `Number`, `Binary`, or one of them with a custom suffix (`Number.int`). */
  readonly dataType: string;
  /** The value of a Number attribute, as SQS carries it (text). */
  readonly stringValue?: string | undefined;
  /** The bytes of a Binary attribute. */
  readonly binaryValue?: Uint8Array | undefined;
}

/**
 * One received SQS message, normalised from whichever shape carried it (the SDK's `ReceiveMessage`
 * answer, a Lambda SQS event record).
 */
export interface SqsRecord {
  /** SQS's id of this stored copy. */
  readonly messageId: string;
  /** The handle of this receive: what delete and visibility changes take. */
  readonly receiptHandle: string;
  /** The body as SQS carries it. */
  readonly body: string;
  /** `ApproximateReceiveCount`: SQS's count of receives of this copy, this one included. */
  readonly receiveCount: number;
  /** `SentTimestamp`, epoch milliseconds. */
  readonly sentTimestamp?: number | undefined;
  /** `MessageGroupId` (FIFO queues). */
  readonly messageGroupId?: string | undefined;
  /** The String message attributes (custom `String.*` types included), name → value. */
  readonly attributes: Readonly<Record<string, string>>;
  /** The Number and Binary message attributes, where there are any. */
  readonly otherAttributes?: Readonly<Record<string, SqsAttributeValue>> | undefined;
}

/** What a receive knows of a record beyond the record itself. */
export interface SqsEnvelopeContext {
  /** The application's topic the queue holds. */
  readonly topic: string;
  /** How to keep the delivery while its handler runs (visibility extensions). @default none */
  readonly keepAlive?: DeliveryKeepAlive | undefined;
}

/**
 * The Number and Binary attributes of `record` that its envelope has no text header for (bytes that are
 * not UTF-8, a number past 2^53): a retry, dead-letter or replay copy stores them as they came.
 */
export function unreadAttributes(
  record: SqsRecord,
  envelope: Pick<Envelope, 'headers'>,
): Record<string, SqsAttribute> {
  const kept: Record<string, SqsAttribute> = {};
  for (const [name, value] of Object.entries(record.otherAttributes ?? {})) {
    if (envelope.headers[name] !== undefined) continue;
    kept[name] = {
      DataType: value.dataType,
      ...(value.stringValue === undefined ? {} : { StringValue: value.stringValue }),
      ...(value.binaryValue === undefined ? {} : { BinaryValue: value.binaryValue }),
    };
  }
  return kept;
}

/** The headers of a record: its attributes as text, the packed ones unpacked. */
function readHeaders(record: SqsRecord): HeaderText {
  const text = new HeaderText();
  for (const [name, value] of Object.entries(record.attributes)) {
    if (name !== PACKED_HEADERS_ATTRIBUTE) text.text(name, value);
  }
  for (const [name, value] of Object.entries(record.otherAttributes ?? {})) {
    if (value.dataType.startsWith('Binary')) {
      text.bytes(name, value.binaryValue ?? new Uint8Array());
    } else {
      const number = value.stringValue ?? '';
      if (/^-?\d+$/.test(number) && Number.isSafeInteger(Number(number))) text.text(name, number);
      else text.drop(name, NON_KEY.inexactNumber);
    }
  }
  const packed = record.attributes[PACKED_HEADERS_ATTRIBUTE];
  if (packed !== undefined) {
    const unpacked = parsePacked(packed);
    if (unpacked === undefined) text.text(PACKED_HEADERS_ATTRIBUTE, packed);
    else for (const [name, value] of Object.entries(unpacked)) text.text(name, value);
  }
  return text;
}

/** The packed headers, or `undefined` when the attribute is not a JSON object of text (another producer's). */
function parsePacked(packed: string): Record<string, string> | undefined {
  try {
    const value: unknown = JSON.parse(packed);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    const entries = Object.entries(value as Record<string, unknown>);
    return entries.every(([, item]) => typeof item === 'string')
      ? (Object.fromEntries(entries) as Record<string, string>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The body's bytes, decoded as {@link BODY_ENCODING_HEADER} says (a body of another producer as UTF-8). */
function readBody(body: string, encoding: string | undefined): Uint8Array {
  if (encoding === 'empty') return new Uint8Array();
  const bytes = encoding === 'base64' ? Buffer.from(body, 'base64') : Buffer.from(body, 'utf8');
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * The envelope of a record: its headers, its body's bytes, oncemq's delivery count from
 * `oncemq-delivery-count` (a retry copy's; 1 on a first copy) and SQS's `ApproximateReceiveCount` as the
 * broker's raw count.
 */
export function sqsEnvelope(record: SqsRecord, context: SqsEnvelopeContext): Envelope {
  const { headers, nonKey } = readHeaders(record);
  const encoding = headers[BODY_ENCODING_HEADER];
  const known = encoding === 'base64' || encoding === 'empty';
  const body = readBody(record.body, known ? encoding : undefined);
  if (known) Reflect.deleteProperty(headers, BODY_ENCODING_HEADER);
  const sent = record.sentTimestamp;
  return adoptEnvelope({
    brokerId: headers[LOG_ID_HEADER] ?? record.messageId,
    topic: context.topic,
    headers,
    body,
    deliveryCount: readDeliveryCount(headers),
    brokerDeliveryCount: record.receiveCount,
    publishedAt: sent !== undefined && Number.isFinite(sent) && sent > 0 ? new Date(sent) : undefined,
    keepAlive: context.keepAlive,
    nonKeyHeaders: nonKey,
  });
}

/** A message as the SDK's `ReceiveMessage` answer carries it (the fields read here). */
export interface SdkMessage {
  MessageId?: string | undefined;
  ReceiptHandle?: string | undefined;
  Body?: string | undefined;
  Attributes?: Partial<Record<string, string>> | undefined;
  MessageAttributes?:
    | Record<
        string,
        {
          DataType?: string | undefined;
          StringValue?: string | undefined;
          BinaryValue?: Uint8Array | undefined;
        }
      >
    | undefined;
}

/**
 * The normalised record of a message the SDK received (asked with every system and message attribute).
 * @param message one message of a `ReceiveMessage` answer
 */
export function sqsRecordOf(message: SdkMessage): SqsRecord {
  const attributes: Record<string, string> = {};
  let other: Record<string, SqsAttributeValue> | undefined;
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    const type = value.DataType ?? 'String';
    if (type.startsWith('String')) attributes[name] = value.StringValue ?? '';
    else
      (other ??= {})[name] = {
        dataType: type,
        stringValue: value.StringValue,
        binaryValue: value.BinaryValue,
      };
  }
  const system = message.Attributes ?? {};
  const sent = Number(system.SentTimestamp);
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    receiveCount: Number(system.ApproximateReceiveCount ?? 1) || 1,
    sentTimestamp: Number.isFinite(sent) ? sent : undefined,
    messageGroupId: system.MessageGroupId,
    attributes,
    otherAttributes: other,
  };
}
