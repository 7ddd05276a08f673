import type { ClaimRequest, LedgerRecord } from './ledger.js';

/**
 * What a claim does when the key already has a row. Shared by every backend so that they all
 * answer the same way:
 * - a different payload fingerprint (both recorded) is a `conflict`, whatever the status;
 * - SUCCESS is a `duplicate`;
 * - PROCESSING with a lease still running is `busy`;
 * - PROCESSING past its lease (the owner died) or FAIL (the last attempt failed) is taken over: `reclaim`.
 */
export type ExistingRowDecision = 'conflict' | 'duplicate' | 'busy' | 'reclaim';

/**
 * Decides a claim against the row already stored for its key (see {@link ExistingRowDecision}), at
 * `nowMs` on the application's clock. A custom backend calls it with the row its claim found, so
 * that it answers as the built-in ledgers do.
 */
export function decideExisting(
  record: LedgerRecord,
  request: ClaimRequest,
  nowMs: number,
): ExistingRowDecision {
  if (
    record.fingerprint !== null &&
    request.fingerprint !== null &&
    record.fingerprint !== request.fingerprint
  ) {
    return 'conflict';
  }
  switch (record.status) {
    case 'SUCCESS':
      return 'duplicate';
    case 'FAIL':
      return 'reclaim';
    case 'PROCESSING':
      return record.leaseUntil !== null && record.leaseUntil.getTime() > nowMs ? 'busy' : 'reclaim';
  }
}

/** How many times a claim re-reads a row that changed under it before answering `busy`. */
export const CLAIM_RACE_ATTEMPTS = 5;
