import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError, LedgerUnavailableError } from '../../core/errors.js';
import type { LedgerRecord, LedgerStatus } from '../ledger.js';

/**
 * One ledger record as a Redis string value: compact JSON whose field names the Lua scripts read
 * (`s` status, `o` owner, `a` attempt, `l` lease end, `f` fingerprint, `b` broker id, `t` topic,
 * `r` remark, `x` result, `c` created, `u` updated; times in epoch milliseconds). The group and key
 * live in the Redis key itself.
 */
export interface StoredRecord {
  s: LedgerStatus;
  o: string | null;
  a: number;
  l: number | null;
  f: string | null;
  b: string | null;
  t: string | null;
  r: string | null;
  x: string | null;
  c: number;
  u: number;
}

/** Prefixes must not contain a hash tag of their own, or every key would land on one Cluster slot. */
export const REDIS_PREFIX_PATTERN = /^[^{}\s]{1,100}$/;

export function validatePrefix(value: unknown, field = 'prefix'): string {
  if (typeof value !== 'string' || !REDIS_PREFIX_PATTERN.test(value)) {
    throw new ConfigError(
      field,
      `${JSON.stringify(value)} is not a valid key prefix; use 1 to 100 characters without braces or spaces`,
    );
  }
  return value;
}

/** Checks a Redis TTL from configuration: PX takes a whole, positive number of milliseconds. */
export function redisTtl(value: Duration, field: string): number {
  const ms = parseDuration(value, field);
  if (!Number.isSafeInteger(ms) || ms < 1) {
    throw new ConfigError(
      field,
      `the Redis TTL must be a whole number of milliseconds of at least 1ms, got ${String(value)}; ` +
        'a zero or fractional TTL would let Redis drop finished keys at once',
    );
  }
  return ms;
}

/**
 * The Redis key of `(group, key)`: `<prefix>:<group>:{<key>}`. The business key is the hash tag, so
 * every record of one key maps to one Cluster slot while different keys spread over the cluster.
 * Unambiguous although groups may hold `:`: neither the prefix nor a group (GROUP_PATTERN, checked
 * by the runtime before every claim) holds a `{`, so the first `{` ends the group and starts the key
 * (`('a:b', 'c')` is `oncemq:a:b:{c}`, `('a', 'b:c')` is `oncemq:a:{b:c}`).
 */
export function redisKey(prefix: string, group: string, key: string): string {
  return `${prefix}:${group}:{${key}}`;
}

export function encodeRecord(record: StoredRecord): string {
  return JSON.stringify(record);
}

const STATUSES: readonly unknown[] = ['PROCESSING', 'SUCCESS', 'FAIL'];

function field<T>(value: unknown, check: (v: unknown) => v is T): T | null {
  return value === undefined || value === null ? null : check(value) ? value : null;
}
const isString = (v: unknown): v is string => typeof v === 'string';
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Reads a stored value back; a value oncemq did not write is refused, never overwritten. */
export function decodeRecord(group: string, key: string, value: string): LedgerRecord {
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(value) as Record<string, unknown>;
  } catch (error) {
    throw new LedgerUnavailableError(`the Redis value of ${group}/${key} is not an oncemq ledger record`, {
      cause: error,
    });
  }
  if (typeof raw !== 'object' || !STATUSES.includes(raw.s) || !isNumber(raw.a) || !isNumber(raw.c)) {
    throw new LedgerUnavailableError(`the Redis value of ${group}/${key} is not an oncemq ledger record`);
  }
  const lease = field(raw.l, isNumber);
  return {
    group,
    key,
    status: raw.s as LedgerStatus,
    fingerprint: field(raw.f, isString),
    owner: field(raw.o, isString),
    attempt: raw.a,
    leaseUntil: lease === null ? null : new Date(lease),
    brokerId: field(raw.b, isString),
    topic: field(raw.t, isString),
    remark: field(raw.r, isString),
    result: field(raw.x, isString),
    createdAt: new Date(raw.c),
    updatedAt: new Date(field(raw.u, isNumber) ?? raw.c),
  };
}

/** The stored form of a record (the inverse of {@link decodeRecord}). */
export function storedFrom(record: LedgerRecord): StoredRecord {
  return {
    s: record.status,
    o: record.owner,
    a: record.attempt,
    l: record.leaseUntil === null ? null : record.leaseUntil.getTime(),
    f: record.fingerprint,
    b: record.brokerId,
    t: record.topic,
    r: record.remark,
    x: record.result,
    c: record.createdAt.getTime(),
    u: record.updatedAt.getTime(),
  };
}
