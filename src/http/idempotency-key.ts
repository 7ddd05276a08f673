import { ConfigError } from '../core/errors.js';
import type { HttpKeySource, HttpRequest } from './http-request.js';

/** The header the IETF `Idempotency-Key` draft names, lower-case as {@link HttpRequest.headers} holds it. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** Longest key accepted, in characters (all ASCII): a longer one is answered 400, never claimed. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Why a request's key was refused; the edge answers 400 with this text. */
export class InvalidIdempotencyKeyError extends Error {
  /** Always `'InvalidIdempotencyKeyError'`. */
  override name = 'InvalidIdempotencyKeyError' as const;
}

// A token: visible ASCII but the characters that make a header value a quoted string or a list.
const TOKEN = /^[\x21\x23-\x2b\x2d-\x5b\x5d-\x7e]+$/;
// A structured-field string (RFC 8941 §3.3.3): printable ASCII in quotes, `\"` and `\\` escaped.
const SF_STRING = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/;
const PRINTABLE = /^[\x20-\x7e]+$/;

/**
 * Reads an `Idempotency-Key` value: a structured-field string as the draft writes it (`"8e03…"`), or,
 * leniently, a bare token as most clients send it (`8e03…`). Two headers joined into a list, bytes
 * outside printable ASCII, or a broken quoted string are refused with {@link InvalidIdempotencyKeyError}.
 */
export function parseIdempotencyKey(value: string): string {
  const text = value.trim();
  if (text.startsWith('"')) {
    const match = SF_STRING.exec(text);
    if (match === null) {
      throw new InvalidIdempotencyKeyError(
        'the key is not one quoted string of printable ASCII (was the header sent twice?)',
      );
    }
    return (match[1] ?? '').replace(/\\(["\\])/g, '$1');
  }
  if (!TOKEN.test(text)) {
    throw new InvalidIdempotencyKeyError(
      'the key holds a character outside visible ASCII, a comma, a quote or a backslash (was the header sent twice?); send it as a quoted string',
    );
  }
  return text;
}

/**
 * A key source reading the header `name` as an `Idempotency-Key` value: a structured-field string
 * (`"8e03…"`) or a bare token (`8e03…`); a list of two, bytes outside printable ASCII or a broken
 * quoted string are refused with {@link InvalidIdempotencyKeyError}. `undefined` when the request has
 * no such header.
 */
export function headerKey(name: string): HttpKeySource {
  if (typeof name !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
    throw new ConfigError('key', `${JSON.stringify(name)} is not a header name`);
  }
  const lower = name.toLowerCase();
  return (request: HttpRequest) => {
    const value = request.headers[lower];
    return value === undefined ? undefined : parseIdempotencyKey(value);
  };
}

/** The default key source: the `Idempotency-Key` header. */
export const IDEMPOTENCY_KEY_SOURCE: HttpKeySource = headerKey(IDEMPOTENCY_KEY_HEADER);

/**
 * Checks a key read by any key source: 1 to {@link MAX_IDEMPOTENCY_KEY_LENGTH} characters of
 * printable ASCII (no control character, nothing a header could not carry). Returns the reason it is
 * refused, or `undefined` when it is fine.
 */
export function idempotencyKeyProblem(key: string): string | undefined {
  if (key === '') return 'the key is empty';
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    return `the key is ${key.length} characters long, more than ${MAX_IDEMPOTENCY_KEY_LENGTH}`;
  }
  if (!PRINTABLE.test(key)) return 'the key holds a control character or a character outside ASCII';
  return undefined;
}
