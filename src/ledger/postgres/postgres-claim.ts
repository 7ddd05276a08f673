import { CLAIM_RACE_ATTEMPTS, decideExisting } from '../claim-decision.js';
import { lostEveryRound } from '../claim-round.js';
import type { ClaimRequest, ClaimResult, LedgerRecord } from '../ledger.js';
import { rowToRecord, TIMESTAMPTZ_COLUMNS, type LedgerRow } from '../ledger-row.js';
import { pgExecute, pgQuery, type PgClientLike } from './postgres-client.js';
import type { PgStatements } from './postgres-ledger-sql.js';
import { keyLockText } from './postgres-partitions.js';
import { ownerToken } from '../owner-token.js';

/** What a single-key claim needs from its ledger. */
export interface PgClaimContext {
  readonly sql: PgStatements;
  readonly clock: () => number;
  /** Take the key's advisory lock first (the partitioned ledger). */
  readonly partitioned: boolean;
}

/** The record of a row pg returned. */
export function pgRecord(row: LedgerRow): LedgerRecord {
  return rowToRecord(row, TIMESTAMPTZ_COLUMNS);
}

/**
 * Claims one key on `client` (a transaction, or the pool for leased autocommit claims) with
 * `INSERT … ON CONFLICT DO NOTHING`; when the key has a row, reads it, decides it with
 * decideExisting() and takes it over with an attempt- and owner-checked UPDATE; retries a few times
 * when the row changes under it.
 */
export async function pgClaimOne(
  client: PgClientLike,
  request: ClaimRequest,
  status: 'PROCESSING' | 'SUCCESS',
  context: PgClaimContext,
): Promise<ClaimResult> {
  const sql = context.sql;
  if (context.partitioned) {
    await pgQuery(client, sql.lock, [keyLockText(request.group, request.key)], 'locking the key');
  }
  let record: LedgerRecord | undefined;
  for (let round = 0; round < CLAIM_RACE_ATTEMPTS; round++) {
    const now = context.clock();
    const owner = ownerToken();
    const leaseUntil = new Date(now + request.leaseMs);
    const storedLease = status === 'PROCESSING' ? leaseUntil : null;
    const claim = { group: request.group, key: request.key, owner, leaseUntil };
    const { group, key, fingerprint, brokerId, topic } = request;
    const inserted = await pgExecute(
      client,
      sql.claim,
      [group, key, status, fingerprint, owner, storedLease, brokerId, topic, new Date(now)],
      'claiming',
    );
    if (inserted === 1) return { status: 'acquired', claim: { ...claim, attempt: 1 } };
    // The key has a row: read it with a statement of its own, whose snapshot also holds a row
    // committed by a transaction the insert waited for.
    const row = (await pgQuery<LedgerRow>(client, sql.select, [group, key], 'reading'))[0];
    if (row === undefined) continue;
    record = pgRecord(row);
    const decision = decideExisting(record, request, now);
    if (decision !== 'reclaim') return { status: decision, record };
    const taken = await pgExecute(
      client,
      sql.reclaim,
      [
        ...[group, key, status, owner, storedLease, brokerId, topic, fingerprint, new Date(now)],
        ...[record.status, record.attempt, record.owner],
      ],
      'reclaiming',
    );
    if (taken === 1)
      return { status: 'reclaimed', claim: { ...claim, attempt: record.attempt + 1 }, previous: record };
  }
  return lostEveryRound(request, record);
}
