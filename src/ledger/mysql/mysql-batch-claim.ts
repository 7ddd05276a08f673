import { answerTwins, rowIdentity, twinsOf, wonClaims, type BatchPlan } from '../batch-claim.js';
import { decideExisting } from '../claim-decision.js';
import type { BatchWork, ClaimRequest, ClaimResult, LedgerRecord } from '../ledger.js';
import { columnText, type LedgerRow } from '../ledger-row.js';
import { rows, type MysqlConnectionLike, type MysqlValue } from './mysql-client.js';
import { claimOnMysql, mysqlRecord } from './mysql-claim.js';
import type { MysqlStatements } from './mysql-schema.js';
import { ownerToken } from '../owner-token.js';

/**
 * Reads the rows of `requests` by `(group, key)`. Every one of them is locked by this transaction
 * already (the batch's insert took each row's lock), so a plain read sees its latest committed
 * version — unless the transaction is the caller's (`locking`), whose snapshot may be older: then
 * the read is `FOR UPDATE`. A locking read of an IN list takes next-key locks on the rows after the
 * keys, which is what made concurrent batches and single claims deadlock on each other's gaps.
 */
async function selectMany(
  conn: MysqlConnectionLike,
  table: string,
  requests: readonly ClaimRequest[],
  locking: boolean,
): Promise<Map<string, LedgerRecord>> {
  const tuples = requests.map(() => '(?, ?)').join(', ');
  const values = requests.flatMap((r) => [r.group, r.key]);
  const [found] = await conn.execute(
    `SELECT * FROM ${table} WHERE (consumer_group, msg_key) IN (${tuples})${locking ? ' FOR UPDATE' : ''}`,
    values,
  );
  return new Map(
    rows<LedgerRow>(found).map((row) => [
      rowIdentity(columnText(row.consumer_group), columnText(row.msg_key)),
      mysqlRecord(row),
    ]),
  );
}

/** How a batch claim runs on its connection. */
export interface MysqlBatchContext {
  readonly s: MysqlStatements;
  readonly table: string;
  readonly clock: () => number;
  /** The claim joined the caller's open transaction (a savepoint), whose snapshot may predate the claim. */
  readonly nested: boolean;
}

/**
 * Claims a batch: one multi-row insert for every distinct key (sorted, so concurrent batches lock rows
 * in one order), then one read. A row carrying the owner token this batch generated was inserted by
 * it (a duplicate leaves the existing row's owner as it was); the others are decided by
 * decideExisting, and the rare reclaim goes through the single-key claim. Driver errors are raw.
 */
export async function claimBatchOnMysql(
  conn: MysqlConnectionLike,
  requests: readonly ClaimRequest[],
  plan: BatchPlan,
  context: MysqlBatchContext,
): Promise<(ClaimResult | undefined)[]> {
  const { s, clock } = context;
  const results: (ClaimResult | undefined)[] = requests.map(() => undefined);
  const { distinct } = plan;
  if (distinct.length === 0) return results;
  const now = clock();
  const picked = distinct.map((index) => requests[index] as ClaimRequest);
  // The rows a batch inserts are claimed by one transaction, which is their one owner.
  const owner = ownerToken();
  const values: MysqlValue[] = picked.flatMap((r) => [
    r.group,
    r.key,
    r.fingerprint,
    owner,
    r.brokerId,
    r.topic,
    now,
    now,
  ]);
  await conn.execute(s.insertMany(picked.length), values);
  const found = await selectMany(conn, context.table, picked, context.nested);
  for (const index of distinct) {
    const r = requests[index] as ClaimRequest;
    const record = found.get(rowIdentity(r.group, r.key));
    if (record?.owner === owner && record.attempt === 1 && record.status === 'SUCCESS') {
      const claim = { group: r.group, key: r.key, owner, attempt: 1, leaseUntil: new Date(now + r.leaseMs) };
      results[index] = { status: 'acquired', claim };
      continue;
    }
    const decision = record === undefined ? 'reclaim' : decideExisting(record, r, now);
    results[index] =
      record !== undefined && decision !== 'reclaim'
        ? { status: decision, record }
        : await claimOnMysql(conn, s, r, 'SUCCESS', true, clock);
  }
  return results;
}

/**
 * After the claims of a batch that won keys: runs `work` once for the won ones (its errors pass
 * unchanged), stores their results, and decides later copies of a key on the row their first copy left.
 */
export async function finishBatchOnMysql(
  conn: MysqlConnectionLike,
  requests: readonly ClaimRequest[],
  plan: BatchPlan,
  results: readonly (ClaimResult | undefined)[],
  work: BatchWork<never>,
  context: MysqlBatchContext,
): Promise<readonly ClaimResult[]> {
  const won = wonClaims(results);
  const stored = await work(conn as never, won);
  for (const [i, { claim }] of won.entries()) {
    const result = stored[i];
    if (result !== null && result !== undefined) {
      await conn.execute(context.s.storeResult, [result, claim.group, claim.key]);
    }
  }
  const twins = twinsOf(plan).map((i) => requests[i] as ClaimRequest);
  const found =
    twins.length === 0
      ? new Map<string, LedgerRecord>()
      : await selectMany(conn, context.table, twins, context.nested);
  return answerTwins(plan, requests, results, (r) => found.get(rowIdentity(r.group, r.key)), context.clock());
}
