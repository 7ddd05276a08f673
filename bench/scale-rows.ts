/**
 * The rows the `scale` suite bulk-loads into a ledger, the same on every backend: what each column
 * holds for row number `i`, as the ledger writes it, and where in time the row lies.
 *
 * - group: one of {@link SCALE_GROUPS} (`i % 4`), topic the group's own.
 * - key: an event id, the md5 of `k<i>` written as a UUID: random across the key space, so new rows
 *   land on random index pages as real event ids do.
 * - status: SUCCESS, with one row in 100 FAIL (attempt 2, a remark) and one in 10,000 PROCESSING
 *   (a stuck claim: an owner and a lease long past).
 * - fingerprint: 64 hex characters (a SHA-256's length); broker id `msg-<i>`; one row in ten has a
 *   small stored result.
 * - time: the rows span the {@link SCALE_DAYS} whole UTC days before `end` (today's midnight), spread
 *   by the golden-ratio sequence so that every prefix of the rows (1M, 10M, 50M) has the same spread.
 *   The oldest {@link EXPIRED_DAYS} days, a fifth of the rows, lie before the purge's cut-off.
 */
import { createHash } from 'node:crypto';

/** The consumer groups the rows belong to (`i % 4`), each with its topic. */
export const SCALE_GROUPS = [
  { group: 'points', topic: 'payments' },
  { group: 'orders', topic: 'orders' },
  { group: 'emails', topic: 'signups' },
  { group: 'audit', topic: 'audit-log' },
] as const;

export const DAY_MS = 86_400_000;
/** Whole days the loaded rows span, ending at today's midnight (UTC). */
export const SCALE_DAYS = 10;
/** The oldest days of the span, whose finished rows the purge deletes. */
export const EXPIRED_DAYS = 2;
/** The golden ratio's fraction: `frac(i × φ)` spreads any prefix of the rows evenly over the span. */
export const SPREAD = 0.6180339887498949;

/** Today's midnight (UTC): the loaded rows end there, the bench's own claims come after. */
export function spanEnd(nowMs: number): number {
  return Math.floor(nowMs / DAY_MS) * DAY_MS;
}

/** The purge's cut-off: finished rows updated before it are expired (a day boundary). */
export function purgeCutoff(endMs: number): number {
  return endMs - (SCALE_DAYS - EXPIRED_DAYS) * DAY_MS;
}

/** The share of the loaded rows that lie before the cut-off. */
export const EXPIRED_SHARE = EXPIRED_DAYS / SCALE_DAYS;

/** The group and key of loaded row `i`: what a replay of that event claims. */
export function loadedKey(i: number): { group: string; key: string } {
  const hex = createHash('md5').update(`k${i}`).digest('hex');
  const key = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { group: SCALE_GROUPS[i % SCALE_GROUPS.length]?.group ?? 'points', key };
}
