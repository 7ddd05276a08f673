import { decideExisting } from './claim-decision.js';
import { isWon, type Claim, type ClaimRequest, type ClaimResult, type LedgerRecord } from './ledger.js';

/**
 * The part of a batch claim every SQL backend shares: which requests are the first of their
 * `(group, key)` in the batch (later copies are decided on the row their first copy left), and how
 * the answers are put back in request order.
 */
export interface BatchPlan {
  /** Indexes of the first request of each distinct `(group, key)`, in a canonical (sorted) order. */
  readonly distinct: readonly number[];
  /** For each request, the index of the first request with its `(group, key)`. */
  readonly firstOf: readonly number[];
  /**
   * The identity of a ledger row of this batch's groups: {@link rowIdentity}, or the key alone when
   * the batch has one group (as a pipeline's batches have), which spares a string per row.
   */
  readonly identity: (group: string, key: string) => string;
}

/**
 * Identity of a ledger row inside one batch: the group's length first, so that no two pairs share
 * it whatever `:` the group and key hold (`('a:b', 'c')` and `('a', 'b:c')` are two rows).
 */
export function rowIdentity(group: string, key: string): string {
  return `${group.length}:${group}:${key}`;
}

const keyIdentity = (_group: string, key: string): string => key;

/** Orders two requests by `(group, key)`, then by position, so equal keys keep their order. */
function byRow(requests: readonly ClaimRequest[], a: number, b: number): number {
  const x = requests[a] as ClaimRequest;
  const y = requests[b] as ClaimRequest;
  if (x.group !== y.group) return x.group < y.group ? -1 : 1;
  if (x.key !== y.key) return x.key < y.key ? -1 : 1;
  return a - b;
}

/**
 * Plans a batch. The distinct requests come sorted by `(group, key)`, so that concurrent batches
 * lock rows in one global order and cannot deadlock each other. The sort also finds the repeated
 * keys (they end up side by side), so planning builds no map and no identity string per request.
 */
export function planBatch(requests: readonly ClaimRequest[]): BatchPlan {
  const group = requests[0]?.group;
  let oneGroup = true;
  for (const request of requests) oneGroup &&= request.group === group;
  const order = requests.map((_, index) => index).sort((a, b) => byRow(requests, a, b));
  const firstOf = order.slice();
  const distinct: number[] = [];
  let previous: ClaimRequest | undefined;
  let first = 0;
  for (const index of order) {
    const request = requests[index] as ClaimRequest;
    if (previous === undefined || request.key !== previous.key || request.group !== previous.group) {
      previous = request;
      first = index;
      distinct.push(index);
    }
    firstOf[index] = first;
  }
  return { distinct, firstOf, identity: oneGroup ? keyIdentity : rowIdentity };
}

/** Indexes of the requests that repeat a key seen earlier in the batch. */
export function twinsOf(plan: BatchPlan): number[] {
  return plan.firstOf.flatMap((first, index) => (first === index ? [] : [index]));
}

/** The won claims of a batch, in request order, as handed to the batch's work. */
export function wonClaims(results: readonly (ClaimResult | undefined)[]): { index: number; claim: Claim }[] {
  const won: { index: number; claim: Claim }[] = [];
  results.forEach((result, index) => {
    if (result !== undefined && isWon(result)) won.push({ index, claim: result.claim });
  });
  return won;
}

/**
 * A later copy of a key within the batch, decided exactly as a later delivery would be on the row
 * its first copy left: a different fingerprint is a conflict, a SUCCESS row a duplicate, a running
 * lease busy. A row that would be taken over is busy: a batch claims a key once.
 */
export function twinResult(record: LedgerRecord, request: ClaimRequest, now: number): ClaimResult {
  const decision = decideExisting(record, request, now);
  return { status: decision === 'reclaim' ? 'busy' : decision, record };
}

/**
 * Fills in the answers of the later copies of each key (left undefined by the claim): each is
 * decided by {@link twinResult} on `row(request)`, the row as it stands after the batch's work, or
 * on the row its first copy was answered with when the batch won nothing. A batch without repeated
 * keys is answered by `results` as they are.
 */
export function answerTwins(
  plan: BatchPlan,
  requests: readonly ClaimRequest[],
  results: readonly (ClaimResult | undefined)[],
  row: (request: ClaimRequest) => LedgerRecord | undefined,
  now: number,
): readonly ClaimResult[] {
  const { firstOf } = plan;
  if (plan.distinct.length === requests.length) return results as readonly ClaimResult[];
  return results.map((result, index) => {
    const firstIndex = firstOf[index] ?? index;
    const first = results[firstIndex] as ClaimResult;
    if (firstIndex === index) return first;
    const request = requests[index] as ClaimRequest;
    const record = row(request) ?? (isWon(first) ? undefined : first.record);
    return record === undefined ? (result ?? first) : twinResult(record, request, now);
  });
}
