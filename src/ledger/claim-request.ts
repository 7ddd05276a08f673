import { PermanentError } from '../core/errors.js';
import { sha256Hex } from '../core/fingerprint.js';
import { GROUP_PATTERN } from '../core/group.js';
import { HASHED_KEY_PREFIX } from '../core/key.js';
import type { ClaimRequest } from './ledger.js';

/*
 * What a ledger row holds, and how much of it: one definition for every backend, the tightest
 * column of any of them (MySQL's), so that whatever fits one ledger fits them all.
 *
 * | field       | limit                                     | beyond it                        |
 * | ----------- | ----------------------------------------- | -------------------------------- |
 * | group       | GROUP_PATTERN (1–128 of `A-Za-z0-9_.:%|-`) | PermanentError('invalid-key')    |
 * | key         | 255 UTF-8 bytes, no NUL, well-formed      | PermanentError('invalid-key')    |
 * | broker id   | 1024 UTF-8 bytes, no NUL, well-formed     | stored as `sha256:<hex>`         |
 * | topic       | 1024 UTF-8 bytes, no NUL, well-formed     | stored as `sha256:<hex>`         |
 * | fingerprint | 128 printable ASCII characters            | stored as `sha256:<hex>`         |
 * | owner       | 64 ASCII characters (oncemq: at most 48)  | (made by the ledger)             |
 * | remark      | 2000 UTF-16 code units                    | cut; NUL and lone surrogates → U+FFFD |
 * | result      | 1 MiB of UTF-8, no NUL, well-formed       | PermanentError('unstorable-result') |
 */

/** Longest business key a ledger stores, in UTF-8 bytes (MySQL `VARBINARY(255)`); normalized keys are at most 200. */
export const MAX_LEDGER_KEY_BYTES = 255;
/** Longest broker id or topic stored as it is, in UTF-8 bytes (MySQL `VARCHAR(1024)`); longer ones are stored as a digest. */
export const MAX_METADATA_BYTES = 1024;
/** Longest payload fingerprint stored as it is (MySQL `VARCHAR(128)` ASCII); longer ones are stored as a digest. */
export const MAX_FINGERPRINT_LENGTH = 128;
/** Longest owner token a backend may make (MySQL `VARCHAR(64)` ASCII); oncemq makes `<uuid>.<counter>` tokens (owner-token.ts). */
export const MAX_OWNER_LENGTH = 64;
/** Longest remark stored, in UTF-16 code units; error texts beyond it are cut (the cause stays in the logs). */
export const MAX_REMARK_LENGTH = 2000;
/** Longest serialized result stored, in UTF-8 bytes (well under MariaDB's default 16 MiB packet). */
export const MAX_RESULT_BYTES = 1_048_576;

const FINGERPRINT = /^[\x20-\x7e]*$/;

/** Whether `value` is at most `max` UTF-8 bytes; counts bytes only when the length alone cannot tell. */
function withinBytes(value: string, max: number): boolean {
  return value.length * 3 <= max || Buffer.byteLength(value, 'utf8') <= max;
}

/** Text every backend stores exactly: no NUL (PostgreSQL text has none), no lone surrogate (UTF-8 has none). */
function storableText(value: string): boolean {
  return !value.includes('\u0000') && value.isWellFormed();
}

/**
 * A broker id or topic in the form the ledger stores: the value itself when it fits
 * ({@link MAX_METADATA_BYTES}, no NUL, no lone surrogate), else `sha256:` and the digest of its UTF-8.
 * Idempotent: a fitted value fits itself. Compare a record's broker id with the fitted broker id of
 * a delivery to tell a redelivery from a republish.
 */
export function fitMetadata(value: string): string {
  return withinBytes(value, MAX_METADATA_BYTES) && storableText(value)
    ? value
    : HASHED_KEY_PREFIX + sha256Hex(value);
}

/** A payload fingerprint in the form the ledger stores: as it is up to 128 printable ASCII characters, else its digest. */
export function fitFingerprint(value: string | null): string | null {
  if (value === null) return null;
  return value.length <= MAX_FINGERPRINT_LENGTH && FINGERPRINT.test(value)
    ? value
    : HASHED_KEY_PREFIX + sha256Hex(value);
}

/**
 * The claim request a ledger stores: broker id, topic and fingerprint fitted to the limits (see
 * {@link fitMetadata}); the same object when nothing had to change. Group and key identify the row
 * and are never changed: one that cannot be stored exactly is a PermanentError('invalid-key').
 */
export function fitClaimRequest(request: ClaimRequest): ClaimRequest {
  checkLedgerKey(request.group, request.key);
  const brokerId = fitMetadata(request.brokerId);
  const topic = fitMetadata(request.topic);
  const fingerprint = fitFingerprint(request.fingerprint);
  if (brokerId === request.brokerId && topic === request.topic && fingerprint === request.fingerprint) {
    return request;
  }
  return { ...request, brokerId, topic, fingerprint };
}

/** Refuses a group or key no ledger can store exactly, with a PermanentError('invalid-key'). */
export function checkLedgerKey(group: string, key: string): void {
  if (!GROUP_PATTERN.test(group)) {
    throw new PermanentError(
      'invalid-key',
      `the group ${JSON.stringify(group.slice(0, 200))} is not a consumer group name (1 to 128 letters, digits or _ . : % | -)`,
    );
  }
  if (key === '' || !storableText(key)) {
    throw new PermanentError(
      'invalid-key',
      'the key is empty, or holds a NUL byte or an unpaired surrogate; pass keys through normalizeKey() before the ledger',
    );
  }
  if (!withinBytes(key, MAX_LEDGER_KEY_BYTES)) {
    throw new PermanentError(
      'invalid-key',
      `the key is longer than ${MAX_LEDGER_KEY_BYTES} UTF-8 bytes; pass keys through normalizeKey() before the ledger`,
    );
  }
}

/** An error text in the form the ledger stores: cut to {@link MAX_REMARK_LENGTH}, NUL and lone surrogates replaced. */
export function fitRemark(text: string): string {
  let cut = text.length > MAX_REMARK_LENGTH ? text.slice(0, MAX_REMARK_LENGTH) : text;
  if (!cut.isWellFormed()) cut = cut.toWellFormed();
  return cut.includes('\u0000') ? cut.replaceAll('\u0000', '\uFFFD') : cut;
}

/**
 * Checks that a serialized result can be stored exactly (it is replayed to duplicates): at most
 * {@link MAX_RESULT_BYTES}, no NUL, no lone surrogate. Anything else is a PermanentError('unstorable-result').
 */
export function checkResult(result: unknown): string | null {
  if (result === null) return null;
  if (typeof result !== 'string') {
    throw new PermanentError(
      'unstorable-result',
      `a stored result must be a string or null, got ${typeof result}`,
    );
  }
  if (!withinBytes(result, MAX_RESULT_BYTES)) {
    throw new PermanentError(
      'unstorable-result',
      `the serialized result is longer than ${MAX_RESULT_BYTES} UTF-8 bytes; return less from the handler`,
    );
  }
  if (!storableText(result)) {
    throw new PermanentError(
      'unstorable-result',
      'the serialized result holds a NUL byte or an unpaired surrogate, which the ledger cannot store exactly',
    );
  }
  return result;
}
