import { LedgerUnavailableError } from '../../core/errors.js';
import { checkBatchResults, planBatch, rowIdentity, twinResult } from '../batch-claim.js';
import { ClaimRound } from '../claim-round.js';
import type { Claim, ClaimRequest, ClaimResult } from '../ledger.js';
import { toRecord, type SqliteLedgerRow as Row, type Statements } from './sqlite-ledger-sql.js';

/** Rows per multi-row INSERT of a batch claim (8 bound values each, well under SQLite's limit). */
export const SQLITE_BATCH_INSERT_ROWS = 100;

/**
 * Claims the distinct keys of a batch inside the caller's open transaction: multi-row inserts (sorted
 * keys, SQLITE_BATCH_INSERT_ROWS at a time) whose RETURNING names the rows they made; every other key
 * is read and answered by its ClaimRound, a failed or expired row taken over in place. Later copies
 * of a key are left undefined. Driver errors are raw.
 */
export function claimBatchOnSqlite(
  s: Statements,
  requests: readonly ClaimRequest[],
  now: number,
): (ClaimResult | undefined)[] {
  const plan = planBatch(requests);
  const results: (ClaimResult | undefined)[] = requests.map(() => undefined);
  for (let start = 0; start < plan.distinct.length; start += SQLITE_BATCH_INSERT_ROWS) {
    const chunk = plan.distinct.slice(start, start + SQLITE_BATCH_INSERT_ROWS);
    const rounds = chunk.map((index) => new ClaimRound(requests[index] as ClaimRequest, 'SUCCESS', now));
    const params: unknown[] = [];
    for (const { request: r, owner } of rounds) {
      params.push(r.group, r.key, r.fingerprint, owner, r.brokerId, r.topic, now, now);
    }
    const inserted = new Set(
      (s.insertMany(chunk.length).all(...params) as { consumer_group: string; msg_key: string }[]).map(
        (row) => rowIdentity(row.consumer_group, row.msg_key),
      ),
    );
    chunk.forEach((index, i) => {
      const round = rounds[i] as ClaimRound;
      const { group, key } = round.request;
      if (inserted.has(rowIdentity(group, key))) {
        results[index] = round.acquired();
        return;
      }
      const row = s.select.get(group, key) as Row | undefined;
      if (row === undefined) throw new LedgerUnavailableError(`batch claim of ${key} raced with a delete`);
      const record = toRecord(row);
      results[index] =
        round.existing(record) ??
        (Number(s.reclaim.run(...round.reclaimValues(record)).changes) === 1
          ? round.reclaimed(record)
          : { status: 'busy', record });
    });
  }
  return results;
}

/**
 * After the batch's work: checks it returned one result per won claim, stores them, and answers later
 * copies of a key in the batch as duplicates of the row their first copy left. Driver errors are raw.
 */
export function finishBatchOnSqlite(
  s: Statements,
  requests: readonly ClaimRequest[],
  results: (ClaimResult | undefined)[],
  won: readonly { readonly claim: Claim }[],
  out: unknown,
): ClaimResult[] {
  const stored = checkBatchResults(out, won.length);
  won.forEach(({ claim }, i) => {
    const result = stored[i] ?? null;
    if (result !== null) s.storeResult.run(result, claim.group, claim.key);
  });
  const plan = planBatch(requests);
  plan.firstOf.forEach((first, index) => {
    if (first === index) return;
    const request = requests[index] as ClaimRequest;
    const row = s.select.get(request.group, request.key) as Row | undefined;
    results[index] = row === undefined ? results[first] : twinResult(toRecord(row));
  });
  return results as ClaimResult[];
}
