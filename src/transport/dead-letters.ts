/**
 * The dead-letter contract: every transport with the `deadLetter` capability keeps the messages it
 * dead-lettered with why, and lists, replays and purges them through this one interface, so that
 * `oncemq dlq` works on every broker. Core only — no I/O.
 */
import { DELIVERY_COUNT_HEADER, KEY_HEADER, readDeliveryCount, type Envelope } from '../core/envelope.js';
import { errorText, OncemqError } from '../core/errors.js';
import type { DeadLetterReason } from '../core/outcome.js';

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
  readonly reason: DeadLetterReason;
  /** Text of the last error. */
  readonly error: string | null;
  /** oncemq's delivery count of the last attempt. */
  readonly deliveryCount: number;
  readonly deadAt: Date;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
  /** What the broker adds in its own terms (RabbitMQ's `x-death`, the original queue or partition). */
  readonly details?: Readonly<Record<string, unknown>> | undefined;
}

/** Input of {@link DeadLetters.list}. */
export interface DeadLetterQuery {
  readonly group: string;
  /** Only dead letters with this reason. */
  readonly reason?: string;
  /** @default 100 */
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
  group: 'oncemq-dead-group',
  reason: 'oncemq-dead-reason',
  error: 'oncemq-dead-error',
  topic: 'oncemq-original-topic',
  brokerId: 'oncemq-original-broker-id',
  deadAt: 'oncemq-dead-at',
  key: 'oncemq-dead-key',
  deliveryCount: DELIVERY_COUNT_HEADER,
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
  readonly group: string;
  readonly reason: DeadLetterReason;
  readonly error: unknown;
  /** The outcome's business key (`outcome.key`), read by the group's own key source. */
  readonly key?: string | null | undefined;
}

/** The headers of the dead-letter copy of `envelope`: its own headers plus {@link DEAD_LETTER_HEADERS}. */
export function deadLetterHeaders(
  envelope: Envelope,
  cause: DeadLetterCause,
  now: Date = new Date(),
): Record<string, string> {
  const error = cause.error === undefined || cause.error === null ? '' : errorText(cause.error);
  return {
    ...envelope.headers,
    [DEAD_LETTER_HEADERS.group]: cause.group,
    [DEAD_LETTER_HEADERS.reason]: headerText(String(cause.reason), 200),
    [DEAD_LETTER_HEADERS.error]: headerText(error, MAX_DEAD_LETTER_ERROR_LENGTH),
    [DEAD_LETTER_HEADERS.topic]: envelope.topic,
    [DEAD_LETTER_HEADERS.brokerId]: envelope.brokerId,
    [DEAD_LETTER_HEADERS.deadAt]: now.toISOString(),
    [DEAD_LETTER_HEADERS.deliveryCount]: String(envelope.deliveryCount),
    // Normalized keys are single-line (a key with control characters is stored as its digest).
    ...(cause.key === undefined || cause.key === null ? {} : { [DEAD_LETTER_HEADERS.key]: cause.key }),
  };
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
  };
}

/**
 * The headers of a replayed copy: the dead letter's own headers without the dead-letter ones, so
 * that it starts again at delivery count 1.
 */
export function replayHeaders(letter: DeadLetter): Record<string, string> {
  const headers: Record<string, string> = {};
  const dropped = new Set<string>(Object.values(DEAD_LETTER_HEADERS));
  for (const [name, value] of Object.entries(letter.headers)) {
    if (!dropped.has(name)) headers[name] = value;
  }
  return headers;
}
