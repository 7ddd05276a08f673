import { LedgerUnavailableError } from '../../core/errors.js';
import { answerTwins, rowIdentity, type BatchPlan } from '../batch-claim.js';
import { ClaimRound } from '../claim-round.js';
import type { Claim, ClaimRequest, ClaimResult, LedgerRecord } from '../ledger.js';
import { EPOCH_MS_COLUMNS, rowToRecord, type LedgerRow } from '../ledger-row.js';
import type { Statements } from './sqlite-ledger-sql.js';

/** Rows per multi-row INSERT of a batch claim (8 bound values each, well under SQLite's limit). */
export const SQLITE_BATCH_INSERT_ROWS = 100;

/** The row of `(group, key)` as it stands, or undefined. */
export function sqliteRecord(s: Statements, group: string, key: string): LedgerRecord | undefined {
  const row = s.select.get(group, key) as LedgerRow | undefined;
  return row === undefined ? undefined : rowToRecord(row, EPOCH_MS_COLUMNS);
}

/**
 * Claims the distinct keys of a batch inside the caller's open transaction: multi-row inserts (sorted
 * keys, SQLITE_BATCH_INSERT_ROWS at a time) whose RETURNING names the rows they made; every other key
 * is read and answered by its ClaimRound, a failed or expired row taken over in place. Later copies
 * of a key are left undefined. Driver errors are raw.
 */
export function claimBatchOnSqlite(
  s: Statements,
  requests: readonly ClaimRequest[],
  plan: BatchPlan,
  now: number,
): (ClaimResult | undefined)[] {
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
      const record = sqliteRecord(s, group, key);
      if (record === undefined) throw new LedgerUnavailableError(`batch claim of ${key} raced with a delete`);
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
 * After the batch's work: stores the results of the won claims, and decides later copies of a key in
 * the batch on the row their first copy left. Driver errors are raw.
 */
export function finishBatchOnSqlite(
  s: Statements,
  requests: readonly ClaimRequest[],
  plan: BatchPlan,
  results: readonly (ClaimResult | undefined)[],
  won: readonly { readonly claim: Claim }[],
  stored: readonly (string | null)[],
  now: number,
): readonly ClaimResult[] {
  won.forEach(({ claim }, i) => {
    const result = stored[i] ?? null;
    if (result !== null) s.storeResult.run(result, claim.group, claim.key);
  });
  return answerTwins(plan, requests, results, (r) => sqliteRecord(s, r.group, r.key), now);
}
