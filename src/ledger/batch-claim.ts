import { ConfigError } from '../core/errors.js';
import { isWon, type Claim, type ClaimRequest, type ClaimResult, type LedgerRecord } from './ledger.js';

/**
 * The part of a batch claim every SQL backend shares: which requests are the first of their
 * `(group, key)` in the batch (later copies are answered as duplicates of the first), and how the
 * answers are put back in request order.
 */
export interface BatchPlan {
  /** Indexes of the first request of each distinct `(group, key)`, in a canonical (sorted) order. */
  readonly distinct: readonly number[];
  /** For each request, the index of the first request with its `(group, key)`. */
  readonly firstOf: readonly number[];
}

/** Identity of a ledger row inside one batch. */
export function rowIdentity(group: string, key: string): string {
  return `${group}\u0000${key}`;
}

/**
 * Plans a batch. The distinct requests come sorted by `(group, key)`, so that concurrent batches
 * lock rows in one global order and cannot deadlock each other.
 */
export function planBatch(requests: readonly ClaimRequest[]): BatchPlan {
  const first = new Map<string, number>();
  const firstOf = requests.map((request, index) => {
    const id = rowIdentity(request.group, request.key);
    const seen = first.get(id);
    if (seen !== undefined) return seen;
    first.set(id, index);
    return index;
  });
  const distinct = [...first.values()].sort((a, b) => {
    const x = requests[a] as ClaimRequest;
    const y = requests[b] as ClaimRequest;
    if (x.group !== y.group) return x.group < y.group ? -1 : 1;
    return x.key < y.key ? -1 : x.key > y.key ? 1 : 0;
  });
  return { distinct, firstOf };
}

/** The won claims of a batch, in request order, as handed to the batch's work. */
export function wonClaims(results: readonly (ClaimResult | undefined)[]): { index: number; claim: Claim }[] {
  const won: { index: number; claim: Claim }[] = [];
  results.forEach((result, index) => {
    if (result !== undefined && isWon(result)) won.push({ index, claim: result.claim });
  });
  return won;
}

/** Checks the work returned one result per won claim. */
export function checkBatchResults(results: unknown, expected: number): readonly (string | null)[] {
  if (!Array.isArray(results) || results.length !== expected) {
    throw new ConfigError(
      'transactionMany.work',
      `must return one result (a string or null) per won claim: expected ${expected}, got ${
        Array.isArray(results) ? results.length : typeof results
      }`,
    );
  }
  return results as (string | null)[];
}

/** A later copy of a key within the batch: a duplicate of the row its first copy left. */
export function twinResult(record: LedgerRecord): ClaimResult {
  return { status: 'duplicate', record };
}
