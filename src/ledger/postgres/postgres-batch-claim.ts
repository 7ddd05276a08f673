import { answerTwins, planBatch, twinsOf, wonClaims, type BatchPlan } from '../batch-claim.js';
import { decideExisting } from '../claim-decision.js';
import type { BatchWork, ClaimRequest, ClaimResult, LedgerRecord } from '../ledger.js';
import type { LedgerRow } from '../ledger-row.js';
import { pgRecord } from './postgres-claim.js';
import { pgExecute, pgQuery, pgTextArray, type PgClientLike } from './postgres-client.js';
import type { PgStatements } from './postgres-ledger-sql.js';
import { ownerToken } from '../owner-token.js';

/** What a batch claim needs from its ledger. */
export interface PgBatchContext {
  readonly sql: PgStatements;
  readonly now: number;
  /** The single-key claim, for keys that need a reclaim or whose row vanished meanwhile. */
  readonly claimOne: (client: PgClientLike, request: ClaimRequest) => Promise<ClaimResult>;
  /** Locks the batch's keys first (the partitioned ledger's uniqueness across days). */
  readonly lockMany?:
    ((client: PgClientLike, requests: readonly ClaimRequest[]) => Promise<void>) | undefined;
}

/** The rows of `requests` as they stand in this transaction, by row identity. */
async function selectMany(
  client: PgClientLike,
  sql: PgStatements,
  requests: readonly ClaimRequest[],
  identity: BatchPlan['identity'],
): Promise<Map<string, LedgerRecord>> {
  const rows = await pgQuery<LedgerRow>(
    client,
    sql.selectMany,
    [pgTextArray(requests.map((r) => r.group)), pgTextArray(requests.map((r) => r.key))],
    'reading a batch',
  );
  return new Map(
    rows.map((row) => [identity(String(row.consumer_group), String(row.msg_key)), pgRecord(row)]),
  );
}

/** One multi-row insert for every distinct key (sorted), then one read of the keys that were not new. */
async function claimBatch(
  client: PgClientLike,
  requests: readonly ClaimRequest[],
  plan: BatchPlan,
  context: PgBatchContext,
): Promise<(ClaimResult | undefined)[]> {
  const { sql, now } = context;
  const { distinct, identity } = plan;
  const picked: ClaimRequest[] = [];
  const groups: string[] = [];
  const keys: string[] = [];
  const prints: (string | null)[] = [];
  const brokerIds: string[] = [];
  const topics: string[] = [];
  // One pass over the batch for the five columns (it runs for every batch).
  for (const index of distinct) {
    const r = requests[index] as ClaimRequest;
    picked.push(r);
    groups.push(r.group);
    keys.push(r.key);
    prints.push(r.fingerprint);
    brokerIds.push(r.brokerId);
    topics.push(r.topic);
  }
  // The rows a batch inserts are claimed by one transaction, which is their one owner.
  const owner = ownerToken();
  if (context.lockMany) await context.lockMany(client, picked);
  const inserted = await pgQuery<{ consumer_group: string; msg_key: string }>(
    client,
    sql.claimMany,
    [
      pgTextArray(groups),
      pgTextArray(keys),
      pgTextArray(prints),
      owner,
      pgTextArray(brokerIds),
      pgTextArray(topics),
      new Date(now),
    ],
    'claiming a batch',
  );
  const won = new Set(inserted.map((row) => identity(row.consumer_group, row.msg_key)));
  const results: (ClaimResult | undefined)[] = requests.map(() => undefined);
  const lost: number[] = [];
  for (const index of distinct) {
    const r = requests[index] as ClaimRequest;
    if (!won.has(identity(r.group, r.key))) {
      lost.push(index);
      continue;
    }
    const claim = { group: r.group, key: r.key, owner, attempt: 1, leaseUntil: new Date(now + r.leaseMs) };
    results[index] = { status: 'acquired', claim };
  }
  if (lost.length > 0) {
    const rows = await selectMany(
      client,
      sql,
      lost.map((i) => requests[i] as ClaimRequest),
      identity,
    );
    for (const index of lost) {
      const r = requests[index] as ClaimRequest;
      const record = rows.get(identity(r.group, r.key));
      const decision = record === undefined ? 'reclaim' : decideExisting(record, r, now);
      results[index] =
        record !== undefined && decision !== 'reclaim'
          ? { status: decision, record }
          : await context.claimOne(client, r);
    }
  }
  return results;
}

/**
 * The body of a PostgreSQL batch transaction: claims, runs `work` once for the won claims, stores
 * their results in one statement, and decides later copies of a key in the batch on its row.
 */
export async function pgClaimMany(
  client: PgClientLike,
  requests: readonly ClaimRequest[],
  work: BatchWork<PgClientLike>,
  context: PgBatchContext,
): Promise<readonly ClaimResult[]> {
  const plan = planBatch(requests);
  const results = await claimBatch(client, requests, plan, context);
  const won = wonClaims(results);
  const stored = await work(client, won);
  const withResult = won.flatMap(({ claim }, i) => {
    const result = stored[i];
    return result === null || result === undefined ? [] : [{ claim, result }];
  });
  if (withResult.length > 0) {
    await pgExecute(
      client,
      context.sql.storeResults,
      [
        pgTextArray(withResult.map((w) => w.claim.group)),
        pgTextArray(withResult.map((w) => w.claim.key)),
        pgTextArray(withResult.map((w) => w.result)),
      ],
      'storing batch results',
    );
  }
  const twins = twinsOf(plan);
  const rows =
    twins.length === 0
      ? new Map<string, LedgerRecord>()
      : await selectMany(
          client,
          context.sql,
          twins.map((i) => requests[i] as ClaimRequest),
          plan.identity,
        );
  return answerTwins(plan, requests, results, (r) => rows.get(plan.identity(r.group, r.key)), context.now);
}
