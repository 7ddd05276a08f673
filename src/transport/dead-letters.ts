/**
 * The dead-letter contract: every transport with the `deadLetter` capability keeps the messages it
 * dead-lettered with why, and lists, replays and purges them through this one interface, so that
 * `oncemq dlq` works on every broker. Core only — no I/O.
 */
import { DELIVERY_COUNT_HEADER, KEY_HEADER, readDeliveryCount, type Envelope } from '../core/envelope.js';
import { errorText, OncemqError } from '../core/errors.js';
import type { DeadLetterReason } from '../core/outcome.js';
import type { DeadLetterOutcome } from './settler.js';

/** One dead-lettered message, as listed. */
export interface DeadLetter {
  /** Its id in the transport's dead-letter queue: what `replay` and `purge` take. */
  readonly id: string;
  /** The consumer group that dead-lettered it; a replay goes to this group only. */
  readonly group: string;
  /** The topic it was published to. */
  readonly topic: string;
  /**
   * The business key as the ledger stores it, wherever the group read it from (a header, the body, a
   * function); `null` when none could be read (a `missing-key` or `invalid-key` dead letter).
   */
  readonly key: string | null;
  /** The broker id of the copy that was dead-lettered. */
  readonly brokerId: string;
  /** Why it was dead-lettered (`missing-key`, `conflict`, `retries-exhausted`, …). */
  readonly reason: DeadLetterReason;
  /** Text of the last error. */
  readonly error: string | null;
  /** oncemq's delivery count of the last attempt. */
  readonly deliveryCount: number;
  /** When it was dead-lettered; the Unix epoch when the broker's copy does not say. */
  readonly deadAt: Date;
  /** The stored copy's headers: the original's own plus {@link DEAD_LETTER_HEADERS}. */
  readonly headers: Readonly<Record<string, string>>;
  /** The original body (its first bytes only, for a letter stored cut). */
  readonly body: Uint8Array;
  /** What the broker adds in its own terms (RabbitMQ's `x-death`, the original queue or partition). */
  readonly details?: Readonly<Record<string, unknown>> | undefined;
  /**
   * Set when the copy was too large for the broker to store as it was and was stored cut
   * (`fitDeadLetter`): `body` is then the first `keptBodyBytes` of the original's
   * `bodyBytes`, and `replay` refuses it. Absent for a letter stored as it was.
   */
  readonly cut?: DeadLetterCut | undefined;
}

/** What a dead letter stored cut left out (see {@link DeadLetter.cut}). */
export interface DeadLetterCut {
  /** Size of the original body, in bytes. */
  readonly bodyBytes: number;
  /** How much of it the dead letter kept (its first bytes). */
  readonly keptBodyBytes: number;
  /** How many of the original's own headers were left out (oncemq's are always kept). */
  readonly droppedHeaders: number;
}

/** Input of {@link DeadLetters.list}. */
export interface DeadLetterQuery {
  /** The consumer group whose dead letters to list. */
  readonly group: string;
  /** Only dead letters with this reason. @default every reason */
  readonly reason?: string;
  /** Most letters returned. @default 100 */
  readonly limit?: number;
}

/** Default page size of {@link DeadLetters.list}. */
export const DEFAULT_DEAD_LETTER_LIMIT = 100;

/**
 * The dead-letter queue of a transport. Every hop is at-least-once like any delivery: a replay
 * repeated after a crash reaches the group twice, and its ledger absorbs the second copy by key.
 */
export interface DeadLetters {
  /** Dead letters of a group, oldest first. A queue, stream or table that does not exist is an error. */
  list(query: DeadLetterQuery): Promise<readonly DeadLetter[]>;
  /**
   * Delivers the chosen dead letters again to their group, and to no other group, as new copies with
   * their key, headers and body and a delivery count of 1; then removes them from the queue. The
   * publish is confirmed before the removal. Ids that are not there (already replayed or purged)
   * are skipped. Returns how many were replayed.
   */
  replay(group: string, ids: readonly string[]): Promise<number>;
  /** Deletes the chosen dead letters for good. Returns how many were deleted. */
  purge(group: string, ids: readonly string[]): Promise<number>;
  /**
   * How many dead letters the group has, counted by the broker without reading them (a queue's
   * message count, a stream's length, a table count). Absent where the transport cannot tell.
   * A group without a dead-letter queue is an error, as for {@link list}.
   */
  depth?(group: string): Promise<number>;
}

/** The dead-letter queue of a transport without the `deadLetter` capability: every call says so. */
export function noDeadLetters(transport: string): DeadLetters {
  const refuse = (): Promise<never> =>
    Promise.reject(
      new OncemqError(
        'config',
        `the ${transport} transport keeps no dead letters (no deadLetter capability)`,
      ),
    );
  return Object.freeze({ list: refuse, replay: refuse, purge: refuse });
}

/**
 * Headers a transport writes on the copy it stores in its dead-letter queue, so that any tool can
 * tell why it is there. Values are single-line text (some brokers refuse line breaks in headers).
 */
export const DEAD_LETTER_HEADERS = Object.freeze({
  /** The consumer group that dead-lettered the message. */
  group: 'oncemq-dead-group',
  /** The dead-letter reason. */
  reason: 'oncemq-dead-reason',
  /** The last error's text, on one line, cut to 1000 characters. */
  error: 'oncemq-dead-error',
  /** The topic the message was published to. */
  topic: 'oncemq-original-topic',
  /** The broker id of the copy that was dead-lettered. */
  brokerId: 'oncemq-original-broker-id',
  /** When it was dead-lettered, as an ISO 8601 time. */
  deadAt: 'oncemq-dead-at',
  /** The business key as the group read it; absent when none could be read. */
  key: 'oncemq-dead-key',
  /** oncemq's delivery count of the last attempt (`oncemq-delivery-count`). */
  deliveryCount: DELIVERY_COUNT_HEADER,
  /** Only on a copy stored cut: the size of the original body, in bytes. */
  bodyBytes: 'oncemq-dead-body-bytes',
  /** Only on a copy stored cut: how many of the original's own headers were left out. */
  droppedHeaders: 'oncemq-dead-dropped-headers',
} as const);

/** Longest error text kept in a dead letter's header. */
export const MAX_DEAD_LETTER_ERROR_LENGTH = 1000;

// eslint-disable-next-line no-control-regex -- line breaks and NUL are exactly what this looks for
const LINE_BREAKS = /[\r\n\u0000]+/g;

function headerText(text: string, max: number): string {
  const flat = text.replace(LINE_BREAKS, ' ');
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** What a dead-letter copy records about why a delivery ended there. */
export interface DeadLetterCause {
  /** The consumer group that dead-letters the delivery. */
  readonly group: string;
  /** The outcome's reason. */
  readonly reason: DeadLetterReason;
  /** The outcome's error, any thrown value; its text goes in the error header. */
  readonly error: unknown;
  /** The outcome's business key (`outcome.key`), read by the group's own key source. */
  readonly key?: string | null | undefined;
  /**
   * The attempt the outcome was reached at (`outcome.deliveryCount`): after retries in place (an ordered
   * lane) it is more than the received envelope's; the envelope's when not given.
   */
  readonly deliveryCount?: number | undefined;
}

/** The headers of the dead-letter copy of `envelope`: its own headers plus {@link DEAD_LETTER_HEADERS}. */
export function deadLetterHeaders(
  envelope: Envelope,
  cause: DeadLetterCause,
  now: Date = new Date(),
): Record<string, string> {
  const error = cause.error === undefined || cause.error === null ? '' : errorText(cause.error);
  return {
    // A dead-letter header the message came with (another producer's, or a replayed copy's) is not this
    // dead letter's: left out, so that a forged key or cut mark never reads as this letter's.
    ...withoutDeadLetterHeaders(envelope.headers),
    [DEAD_LETTER_HEADERS.group]: cause.group,
    [DEAD_LETTER_HEADERS.reason]: headerText(String(cause.reason), 200),
    [DEAD_LETTER_HEADERS.error]: headerText(error, MAX_DEAD_LETTER_ERROR_LENGTH),
    [DEAD_LETTER_HEADERS.topic]: envelope.topic,
    [DEAD_LETTER_HEADERS.brokerId]: envelope.brokerId,
    [DEAD_LETTER_HEADERS.deadAt]: now.toISOString(),
    [DEAD_LETTER_HEADERS.deliveryCount]: String(cause.deliveryCount ?? envelope.deliveryCount),
    // Normalized keys are single-line (a key with control characters is stored as its digest).
    ...(cause.key === undefined || cause.key === null ? {} : { [DEAD_LETTER_HEADERS.key]: cause.key }),
  };
}

/** The names {@link DEAD_LETTER_HEADERS} writes: a copy stored again drops them before writing its own. */
export const DEAD_LETTER_HEADER_NAMES: ReadonlySet<string> = new Set(Object.values(DEAD_LETTER_HEADERS));

/** `headers` without the names {@link DEAD_LETTER_HEADERS} writes. */
export function withoutDeadLetterHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!DEAD_LETTER_HEADER_NAMES.has(name)) kept[name] = value;
  }
  return kept;
}

/** Reads a dead-letter copy written with {@link deadLetterHeaders} back into a {@link DeadLetter}. */
export function readDeadLetter(
  id: string,
  headers: Readonly<Record<string, string>>,
  body: Uint8Array,
  details?: Readonly<Record<string, unknown>>,
): DeadLetter {
  const h = DEAD_LETTER_HEADERS;
  const deadAt = new Date(headers[h.deadAt] ?? Number.NaN);
  const bodyBytes = headers[h.bodyBytes];
  const cut: DeadLetterCut | undefined =
    bodyBytes === undefined
      ? undefined
      : {
          bodyBytes: Number(bodyBytes) || 0,
          keptBodyBytes: body.length,
          droppedHeaders: Number(headers[h.droppedHeaders] ?? 0) || 0,
        };
  return {
    id,
    group: headers[h.group] ?? '',
    topic: headers[h.topic] ?? '',
    key: headers[h.key] ?? headers[KEY_HEADER] ?? null,
    brokerId: headers[h.brokerId] ?? '',
    reason: headers[h.reason] ?? 'unknown',
    error: headers[h.error] || null,
    deliveryCount: readDeliveryCount(headers),
    deadAt: Number.isNaN(deadAt.getTime()) ? new Date(0) : deadAt,
    headers,
    body,
    details,
    ...(cut === undefined ? {} : { cut }),
  };
}

/** A dead letter as a transport is about to store it. */
export interface DeadLetterCopy {
  /** The headers to store, {@link DEAD_LETTER_HEADERS} included. */
  readonly headers: Readonly<Record<string, string>>;
  /** The body to store. */
  readonly body: Uint8Array;
}

/** How large a message the broker stores, as the transport knows it. */
export interface DeadLetterSizeLimit {
  /** Largest message, headers and body together, in bytes (NATS `max_payload`, Kafka `max.message.bytes`). */
  readonly maxBytes: number;
  /** Largest header block, where the broker has a limit of its own for it (RabbitMQ: one frame of `frame_max`). */
  readonly maxHeaderBytes?: number;
}

/**
 * Bytes {@link fitDeadLetter} leaves free under a limit for what the broker adds around the headers and
 * body (a subject, a `Nats-Msg-Id`, AMQP properties and frame ends, a Kafka record batch).
 */
export const DEAD_LETTER_SIZE_RESERVE = 1024;

/** Bytes one header is counted for: its name and value in UTF-8 plus 8 for the broker's framing of it. */
function headerBytes(headers: Readonly<Record<string, string>>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(headers))
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value) + 8;
  return bytes;
}

/** A dead letter that does not fit the broker's limit even with its body and own headers left out. */
export class DeadLetterTooLargeError extends OncemqError {
  /** Always `'DeadLetterTooLargeError'`. */
  override name = 'DeadLetterTooLargeError';

  constructor(headerBytes: number, limit: number) {
    super(
      'permanent',
      `a dead letter's oncemq headers alone (${headerBytes} bytes) do not fit the broker's limit of ${limit} bytes`,
    );
  }
}

/**
 * The rule for a dead letter the broker cannot store as it is (every transport with a size limit uses it):
 * a copy that fits `limit` (less {@link DEAD_LETTER_SIZE_RESERVE}) is returned unchanged. Otherwise the copy
 * keeps every oncemq header (key, ordering key, count, and the dead-letter ones: group, reason, error, topic,
 * original broker id, time) and the original's own headers if they fit, else none of them; its body is cut
 * to the first bytes that fit (possibly none); and it says so in {@link DEAD_LETTER_HEADERS} `bodyBytes`
 * (the original body's size) and `droppedHeaders`. Such a letter is listed with {@link DeadLetter.cut} and
 * never replayed ({@link refuseCutReplay}). When even the oncemq headers do not fit, it throws
 * {@link DeadLetterTooLargeError}, and the transport leaves the original unacked, as for any dead letter
 * it could not store.
 */
export function fitDeadLetter(copy: DeadLetterCopy, limit: DeadLetterSizeLimit): DeadLetterCopy {
  const maxBytes = limit.maxBytes - DEAD_LETTER_SIZE_RESERVE;
  const maxHeaderBytes = Math.min(maxBytes, (limit.maxHeaderBytes ?? Infinity) - DEAD_LETTER_SIZE_RESERVE);
  const whole = headerBytes(copy.headers);
  if (whole <= maxHeaderBytes && whole + copy.body.length <= maxBytes) return copy;
  const marks = {
    [DEAD_LETTER_HEADERS.bodyBytes]: String(copy.body.length),
    [DEAD_LETTER_HEADERS.droppedHeaders]: '0',
  };
  let headers: Record<string, string> = { ...copy.headers, ...marks };
  if (headerBytes(headers) > maxHeaderBytes) {
    const own = Object.entries(copy.headers).filter(([name]) => name.toLowerCase().startsWith('oncemq-'));
    headers = Object.fromEntries(own);
    headers[DEAD_LETTER_HEADERS.bodyBytes] = String(copy.body.length);
    headers[DEAD_LETTER_HEADERS.droppedHeaders] = String(Object.keys(copy.headers).length - own.length);
  }
  const used = headerBytes(headers);
  if (used > maxHeaderBytes) throw new DeadLetterTooLargeError(used, limit.maxBytes);
  return { headers, body: copy.body.subarray(0, Math.min(copy.body.length, maxBytes - used)) };
}

/**
 * The dead-letter settle of a broker whose dead letter is a message it sends (RocketMQ, SQS): the copy of
 * `envelope` with `outcome`'s reason, error, key and attempt, fitted to `limit` ({@link fitDeadLetter}),
 * goes to `send`, which resolves once the broker confirmed it; only then does `ack` let the original go.
 * A copy that cannot be stored, or a send that fails, throws before the ack: the original comes again.
 */
export async function sendDeadLetterThenAck(
  envelope: Envelope,
  group: string,
  outcome: DeadLetterOutcome,
  limit: DeadLetterSizeLimit,
  send: (copy: DeadLetterCopy) => Promise<unknown>,
  ack: () => Promise<void>,
): Promise<void> {
  const { reason, key, deliveryCount } = outcome;
  const error = 'error' in outcome ? outcome.error : undefined;
  const headers = deadLetterHeaders(envelope, { group, reason, error, key, deliveryCount });
  await send(fitDeadLetter({ headers, body: envelope.body }, limit));
  await ack();
}

/** A replay refused: the dead letter was stored cut, so its copy would be a different message. */
export class DeadLetterCutError extends OncemqError {
  /** Always `'DeadLetterCutError'`. */
  override name = 'DeadLetterCutError';
}

/**
 * Throws {@link DeadLetterCutError} for a letter stored cut ({@link DeadLetter.cut}): replaying the part
 * that was kept would deliver a different message than the one that failed. Replay calls it before
 * publishing anything for the letter.
 */
export function refuseCutReplay(letter: DeadLetter): void {
  const { cut } = letter;
  if (cut === undefined) return;
  throw new DeadLetterCutError(
    'permanent',
    `dead letter ${letter.id} of group ${letter.group} was stored cut (it kept ${cut.keptBodyBytes} of its ${cut.bodyBytes} body bytes` +
      `${cut.droppedHeaders > 0 ? ` and none of its ${cut.droppedHeaders} own headers` : ''}, the message being too large for the broker): ` +
      `a replay would deliver a different message; have its producer (broker id ${letter.brokerId}, key ${letter.key ?? 'none'}) send it again, then purge it`,
  );
}

/**
 * The headers of a replayed copy: the dead letter's own headers without the dead-letter ones, so
 * that it starts again at delivery count 1.
 */
export function replayHeaders(letter: DeadLetter): Record<string, string> {
  return withoutDeadLetterHeaders(letter.headers);
}
