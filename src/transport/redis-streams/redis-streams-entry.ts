import { DELIVERY_COUNT_HEADER, type Envelope } from '../../core/envelope.js';
import { ConfigError } from '../../core/errors.js';
import { HeaderText, NON_KEY } from '../../core/header-text.js';
import { deadLetterHeaders, replayHeaders, type DeadLetter, type DeadLetterCause } from '../dead-letters.js';
import type { CommandArg } from './redis-streams-connection.js';
import type { RawEntry } from './redis-streams-replies.js';

/**
 * How a message is laid out in a stream entry: the body in field `body`, every header in a field of
 * its own name. A producer that is not oncemq's can `XADD <stream> * oncemq-key K body B`.
 */
export const BODY_FIELD = 'body';

/** Field of a copy in a group's retry stream: the topic it was published to. */
export const TOPIC_FIELD = 'oncemq-topic';

/** Field of a copy in a group's retry stream: when the first copy was stored, in epoch milliseconds. */
export const PUBLISHED_FIELD = 'oncemq-published-at';

/**
 * Field of a dead letter replayed onto a shard stream: the ordered group it is for (the shard streams
 * are shared by a topic's ordered groups; the others ack it unread).
 */
export const REPLAY_GROUP_FIELD = 'oncemq-replay-group';

/** Fields that are not headers. */
const RESERVED_FIELDS: ReadonlySet<string> = new Set([
  BODY_FIELD,
  TOPIC_FIELD,
  PUBLISHED_FIELD,
  REPLAY_GROUP_FIELD,
]);

const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);

/** Refuses headers whose names the entry layout keeps for itself. */
export function checkHeaderNames(headers: Readonly<Record<string, string>>): void {
  for (const name of Object.keys(headers)) {
    if (RESERVED_FIELDS.has(name)) {
      throw new ConfigError('headers', `'${name}' is a field of the stream entry itself; rename the header`);
    }
  }
}

/** The fields of an entry holding `body` with `headers`. */
export function messageFields(headers: Readonly<Record<string, string>>, body: Uint8Array): CommandArg[] {
  const fields: CommandArg[] = [BODY_FIELD, body];
  for (const [name, value] of Object.entries(headers)) fields.push(name, value);
  return fields;
}

/** What an entry says about its message. */
export interface EntryMessage {
  readonly topic: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Fields no business key is read from (bytes that are not UTF-8, a field held twice): the envelope's `nonKeyHeaders`. */
  readonly nonKey: Readonly<Record<string, string>> | undefined;
  /**
   * The fields left out of {@link headers}, as the entry held them (name, bytes, …): a retry, dead-letter or
   * replay copy stores them again, so no copy loses what the producer sent.
   */
  readonly unread: readonly CommandArg[] | undefined;
  readonly body: Uint8Array;
  readonly publishedAt: Date | undefined;
}

/**
 * Reads an entry: from a topic's stream (`topic` given) the topic and publish time are the stream's
 * and the entry id's; from a retry stream they are in {@link TOPIC_FIELD} and {@link PUBLISHED_FIELD}.
 */
export function readEntry(
  stream: string,
  entry: RawEntry & { readonly fields: ReadonlyMap<string, Uint8Array> },
  topic: string | undefined,
): EntryMessage {
  const text = new HeaderText();
  let unread: CommandArg[] | undefined;
  for (const [name, value] of entry.fields) {
    if (RESERVED_FIELDS.has(name)) continue;
    const values = entry.repeated?.get(name);
    if (values !== undefined) text.drop(name, NON_KEY.repeated);
    else text.bytes(name, value);
    if (text.headers[name] === undefined) {
      unread ??= [];
      for (const each of values ?? [value]) unread.push(name, each);
    }
  }
  const { headers, nonKey } = text;
  const field = (name: string): string | undefined => {
    const value = entry.fields.get(name);
    return value === undefined ? undefined : decoder.decode(value);
  };
  const publishedMs = Number(topic === undefined ? field(PUBLISHED_FIELD) : entry.id.split('-')[0]);
  return {
    topic: topic ?? field(TOPIC_FIELD) ?? stream,
    headers,
    nonKey,
    unread,
    body: entry.fields.get(BODY_FIELD) ?? EMPTY,
    publishedAt: Number.isSafeInteger(publishedMs) && publishedMs > 0 ? new Date(publishedMs) : undefined,
  };
}

/** The fields of the copy a retry stores: the delivery's, charged `deliveryCount`, and where it came from. */
export function retryFields(
  envelope: Envelope,
  deliveryCount: number,
  unread: readonly CommandArg[] = [],
): CommandArg[] {
  const fields = messageFields(
    { ...envelope.headers, [DELIVERY_COUNT_HEADER]: String(deliveryCount) },
    envelope.body,
  );
  fields.push(...unread);
  fields.push(TOPIC_FIELD, envelope.topic);
  if (envelope.publishedAt !== undefined)
    fields.push(PUBLISHED_FIELD, String(envelope.publishedAt.getTime()));
  return fields;
}

/** The fields of a dead letter: the delivery's body, its headers and the standard dead-letter headers. */
export function deadLetterFields(
  envelope: Envelope,
  cause: DeadLetterCause,
  unread: readonly CommandArg[] = [],
): CommandArg[] {
  return [...messageFields(deadLetterHeaders(envelope, cause), envelope.body), ...unread];
}

/**
 * The fields of a replayed dead letter: a fresh copy at delivery count 1, for its topic; onto a shard
 * stream, for `group` only.
 */
export function replayFields(
  letter: DeadLetter,
  group?: string,
  unread: readonly CommandArg[] = [],
): CommandArg[] {
  const fields = messageFields(replayHeaders(letter), letter.body);
  fields.push(...unread);
  fields.push(TOPIC_FIELD, letter.topic);
  if (group !== undefined) fields.push(REPLAY_GROUP_FIELD, group);
  return fields;
}
