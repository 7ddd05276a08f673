import { KEY_HEADER, type Envelope } from './envelope.js';
import { ConfigError, PermanentError } from './errors.js';
import { sha256Hex } from './fingerprint.js';

/**
 * Where the business key of a message comes from. The key identifies the business event and
 * must stay the same across producer retries (order id + event type, payment serial number, event id).
 *
 * - `{ header }` — a message header.
 * - `{ jsonPath }` — a path into the decoded body: `eventId`, `$.payment.serialNo`, `$.items[0].id`,
 *   `$['odd.name']`; an array of paths makes a composite key, its values joined with `:` after each
 *   `\` and `:` in them is escaped with `\` (`['orderId', 'type']` → `o1:paid`; `('o1:x', 'y')` →
 *   `o1\:x:y`), so that two different tuples never make one key.
 * - a function of the envelope and the decoded message.
 * - `{ brokerId: true }` — the broker's message id. Only by explicit opt-in: a producer retry stores a
 *   copy under a new broker id, so such duplicates pass as new events.
 */
export type KeySource =
  | {
      /** The header that carries the key, read as exact text (before the body is decoded). */
      readonly header: string;
    }
  | {
      /** A path into the decoded body, or several for a composite key. */
      readonly jsonPath: string | readonly string[];
    }
  | {
      /** Opt-in to the broker's id of the copy as the key: producer retries then pass as new events. */
      readonly brokerId: true;
    }
  | ((envelope: Envelope, message: unknown) => unknown);

/** The default key source: the header oncemq's own producers set. */
export const DEFAULT_KEY_SOURCE: KeySource = Object.freeze({ header: KEY_HEADER });

/** Keys longer than this many UTF-8 bytes are stored as a SHA-256 digest. */
export const MAX_KEY_BYTES = 200;

/** Prefix of a key stored as a digest. */
export const HASHED_KEY_PREFIX = 'sha256:';

/** One step of a parsed JSON path: a property name or an array index. */
export type PathStep = string | number;

const PATH_STEP = /\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\["((?:[^"\\]|\\.)*)"\]/y;

/** Parses `$.a.b[0]['c.d']` (the leading `$.` is optional) into steps; throws ConfigError if malformed. */
export function parseJsonPath(path: string, field = 'key.jsonPath'): readonly PathStep[] {
  let text = path.trim();
  if (text.startsWith('$')) text = text.slice(1);
  if (text !== '' && !text.startsWith('.') && !text.startsWith('[')) text = `.${text}`;
  if (text === '') throw new ConfigError(field, `"${path}" selects the whole body, not a key`);
  const steps: PathStep[] = [];
  PATH_STEP.lastIndex = 0;
  while (PATH_STEP.lastIndex < text.length) {
    const at = PATH_STEP.lastIndex;
    const match = PATH_STEP.exec(text);
    if (match === null) {
      throw new ConfigError(
        field,
        `cannot parse "${path}" at "${text.slice(at)}"; use a form like $.order.id or $.items[0].id`,
      );
    }
    const [, name, index, single, double] = match;
    if (name !== undefined) steps.push(name);
    else if (index !== undefined) steps.push(Number(index));
    else steps.push((single ?? double ?? '').replace(/\\(.)/g, '$1'));
  }
  return steps;
}

/** The value at `steps` (from {@link parseJsonPath}) in a decoded body, or `undefined` where the path ends. */
export function readPath(value: unknown, steps: readonly PathStep[]): unknown {
  let current = value;
  for (const step of steps) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PathStep, unknown>)[step];
  }
  return current;
}

/** A compiled key source: the raw key of a message (before normalization). */
export interface KeyExtractor {
  /** Reads the key; `message` is the decoded body, or `undefined` when {@link needsMessage} is false. */
  (envelope: Envelope, message: unknown): string;
  /** Whether the key comes from the decoded body (else it is read before the body is decoded). */
  readonly needsMessage: boolean;
}

function extractor(
  needsMessage: boolean,
  read: (envelope: Envelope, message: unknown) => string,
): KeyExtractor {
  return Object.assign(read, { needsMessage });
}

/** Escapes one part of a composite key so that joining parts with `:` stays unambiguous. */
export function escapeKeyPart(part: string): string {
  return part.replace(/[\\:]/g, '\\$&');
}

function scalarKey(value: unknown, where: string): string {
  if (value === undefined || value === null || value === '') {
    throw new PermanentError(
      'missing-key',
      `the message has no business key (${where} is ${value === '' ? 'empty' : String(value)})`,
    );
  }
  if (typeof value === 'string') return value;
  if (typeof value === 'number') {
    // JSON numbers past 2^53 are rounded before oncemq sees them (9007199254740993 reads as
    // 9007199254740992), and fractions have several spellings of one value: such a key cannot be read
    // exactly, so it is refused rather than risk two events sharing one key.
    if (!Number.isSafeInteger(value)) {
      throw new PermanentError(
        'invalid-key',
        `the business key at ${where} is the number ${String(value)}, which cannot be read exactly (not an integer within ±2^53 - 1); send the key as a string`,
      );
    }
    return String(value);
  }
  if (typeof value === 'bigint') return value.toString();
  throw new PermanentError(
    'invalid-key',
    `the business key at ${where} is a ${typeof value}, not a string or number`,
  );
}

/** Validates a key source once, at start-up, and returns the function that applies it. */
export function compileKeySource(source: KeySource, field = 'key'): KeyExtractor {
  if (typeof source === 'function') {
    return extractor(true, (envelope, message) =>
      scalarKey(source(envelope, message), 'the key function result'),
    );
  }
  if ('header' in source) {
    const header = source.header;
    if (typeof header !== 'string' || header === '')
      throw new ConfigError(`${field}.header`, 'must be a non-empty header name');
    return extractor(false, (envelope) => {
      const why = envelope.nonKeyHeaders?.[header];
      if (why !== undefined) {
        throw new PermanentError(
          'invalid-key',
          `the business key in header '${header}' is ${why}; send the key as UTF-8 text`,
        );
      }
      return scalarKey(envelope.headers[header], `header '${header}'`);
    });
  }
  if ('jsonPath' in source) {
    const paths = typeof source.jsonPath === 'string' ? [source.jsonPath] : source.jsonPath;
    if (paths.length === 0) throw new ConfigError(`${field}.jsonPath`, 'must name at least one path');
    const compiled = paths.map((path) => ({ path, steps: parseJsonPath(path, `${field}.jsonPath`) }));
    const read = (message: unknown, { path, steps }: (typeof compiled)[number]): string =>
      scalarKey(readPath(message, steps), `body path '${path}'`);
    const [only] = compiled;
    if (compiled.length === 1 && only !== undefined) {
      return extractor(true, (_envelope, message) => read(message, only));
    }
    return extractor(true, (_envelope, message) =>
      compiled.map((part) => escapeKeyPart(read(message, part))).join(':'),
    );
  }
  if ('brokerId' in source && (source.brokerId as unknown) === true) {
    return extractor(false, (envelope) => scalarKey(envelope.brokerId, 'the broker id'));
  }
  throw new ConfigError(field, 'expected { header }, { jsonPath }, { brokerId: true } or a function');
}

const REPLACEMENT = '\uFFFD';

// eslint-disable-next-line no-control-regex -- control characters are exactly what this looks for
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/u;

/**
 * The form of a key stored in the ledger: the key itself when it is at most {@link MAX_KEY_BYTES}
 * UTF-8 bytes and free of control characters, else `sha256:` and its digest. Never truncated,
 * so two keys never collide by sharing a prefix. A key holding an unpaired surrogate or U+FFFD (the
 * mark of a lossy decoding) is refused as `invalid-key`.
 */
export function normalizeKey(raw: string): string {
  if (!raw.isWellFormed()) {
    throw new PermanentError('invalid-key', 'the business key contains an unpaired UTF-16 surrogate');
  }
  // U+FFFD is what a lossy decoder (a client library's, a producer's) leaves for bytes that are not
  // UTF-8: keys that differed only in those bytes would be one key here, so none is taken.
  if (raw.includes(REPLACEMENT)) {
    throw new PermanentError(
      'invalid-key',
      'the business key contains U+FFFD, the character a decoder leaves for bytes that are not UTF-8 (two different keys may have become one); send the key as UTF-8 text',
    );
  }
  if (
    raw.startsWith(HASHED_KEY_PREFIX) ||
    CONTROL.test(raw) ||
    Buffer.byteLength(raw, 'utf8') > MAX_KEY_BYTES
  ) {
    return HASHED_KEY_PREFIX + sha256Hex(raw);
  }
  return raw;
}
