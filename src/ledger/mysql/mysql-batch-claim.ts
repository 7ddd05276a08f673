import { randomUUID } from 'node:crypto';
import { checkBatchResults, planBatch, rowIdentity, twinResult, wonClaims } from '../batch-claim.js';
import { decideExisting } from '../claim-decision.js';
import type { BatchWork, ClaimRequest, ClaimResult, LedgerRecord } from '../ledger.js';
import {
  columnText,
  rows,
  wrapMysqlError,
  type MysqlConnectionLike,
  type MysqlValue,
} from './mysql-client.js';
import { checkBytes, claimOnMysql, toRecord, type Row } from './mysql-claim.js';
import { MYSQL_GROUP_BYTES, MYSQL_KEY_BYTES, type MysqlStatements } from './mysql-schema.js';

/** Reads the rows of `requests` with FOR UPDATE (latest committed versions), by `(group, key)`. */
async function selectMany(
  conn: MysqlConnectionLike,
  table: string,
  requests: readonly ClaimRequest[],
): Promise<Map<string, LedgerRecord>> {
  const tuples = requests.map(() => '(?, ?)').join(', ');
  const values = requests.flatMap((r) => [r.group, r.key]);
  const [found] = await conn.execute(
    `SELECT * FROM ${table} WHERE (consumer_group, msg_key) IN (${tuples}) FOR UPDATE`,
    values,
  );
  return new Map(
    rows<Row>(found).map((row) => [
      rowIdentity(columnText(row.consumer_group), columnText(row.msg_key)),
      toRecord(row),
    ]),
  );
}

/**
 * Claims a batch: one multi-row insert for every distinct key (sorted, so concurrent batches lock rows
 * in one order), then one locking read. A row carrying the owner token this batch generated was
 * inserted by it (a duplicate leaves the existing row's owner as it was); the others are decided by
 * decideExisting, and the rare reclaim goes through the single-key claim. Driver errors are raw.
 */
export async function claimBatchOnMysql(
  conn: MysqlConnectionLike,
  s: MysqlStatements,
  table: string,
  requests: readonly ClaimRequest[],
  clock: () => number,
): Promise<(ClaimResult | undefined)[]> {
  for (const r of requests) {
    checkBytes(r.key, MYSQL_KEY_BYTES, 'key');
    checkBytes(r.group, MYSQL_GROUP_BYTES, 'group');
  }
  const results: (ClaimResult | undefined)[] = requests.map(() => undefined);
  const { distinct } = planBatch(requests);
  if (distinct.length === 0) return results;
  const now = clock();
  const picked = distinct.map((index) => requests[index] as ClaimRequest);
  const owners = picked.map(() => randomUUID());
  const values: MysqlValue[] = picked.flatMap((r, i) => [
    r.group,
    r.key,
    r.fingerprint,
    owners[i] as string,
    r.brokerId,
    r.topic,
    now,
    now,
  ]);
  await conn.execute(s.insertMany(picked.length), values);
  const found = await selectMany(conn, table, picked);
  for (const [i, index] of distinct.entries()) {
    const r = requests[index] as ClaimRequest;
    const record = found.get(rowIdentity(r.group, r.key));
    if (
      record !== undefined &&
      record.owner === owners[i] &&
      record.attempt === 1 &&
      record.status === 'SUCCESS'
    ) {
      const claim = {
        group: r.group,
        key: r.key,
        owner: owners[i] as string,
        attempt: 1,
        leaseUntil: new Date(now + r.leaseMs),
      };
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
 * After the claims of a batch: runs `work` once for the won ones (its errors pass unchanged), stores
 * their results, and answers later copies of a key in the batch as duplicates of the row.
 */
export async function finishBatchOnMysql(
  conn: MysqlConnectionLike,
  s: MysqlStatements,
  table: string,
  requests: readonly ClaimRequest[],
  results: (ClaimResult | undefined)[],
  work: BatchWork<never>,
): Promise<void> {
  const won = wonClaims(results);
  const stored = checkBatchResults(await work(conn as never, won), won.length);
  try {
    for (const [i, { claim }] of won.entries()) {
      const result = stored[i];
      if (result !== null && result !== undefined) {
        await conn.execute(s.storeResult, [result, claim.group, claim.key]);
      }
    }
    const plan = planBatch(requests);
    const twins = plan.firstOf.flatMap((first, index) => (first === index ? [] : [index]));
    if (twins.length > 0) {
      const found = await selectMany(
        conn,
        table,
        twins.map((i) => requests[i] as ClaimRequest),
      );
      for (const index of twins) {
        const r = requests[index] as ClaimRequest;
        const record = found.get(rowIdentity(r.group, r.key));
        results[index] = record === undefined ? results[plan.firstOf[index] ?? index] : twinResult(record);
      }
    }
  } catch (error) {
    throw wrapMysqlError(error, 'storing batch results');
  }
}

/** Later copies of a key in a batch nothing won: the same answer as their first copy. */
export function fillTwins(
  requests: readonly ClaimRequest[],
  results: (ClaimResult | undefined)[],
): ClaimResult[] {
  const { firstOf } = planBatch(requests);
  return results.map((result, index) => result ?? (results[firstOf[index] ?? index] as ClaimResult));
}
