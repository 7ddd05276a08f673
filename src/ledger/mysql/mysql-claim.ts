import { LedgerUnavailableError, PermanentError } from '../../core/errors.js';
import { CLAIM_RACE_ATTEMPTS } from '../claim-decision.js';
import { ClaimRound, lostEveryRound } from '../claim-round.js';
import type { ClaimRequest, ClaimResult, LedgerRecord, LedgerStatus } from '../ledger.js';
import {
  columnText,
  header,
  matchedRows,
  nullableNumber,
  nullableText,
  rows,
  type MysqlConnectionLike,
  type MysqlPoolLike,
} from './mysql-client.js';
import { MYSQL_GROUP_BYTES, MYSQL_KEY_BYTES, type MysqlStatements } from './mysql-schema.js';

/** A ledger row as mysql2 returns it (VARBINARY as Buffer, BIGINT as number or string). */
export interface Row {
  consumer_group: unknown;
  msg_key: unknown;
  status: unknown;
  fingerprint: unknown;
  owner: unknown;
  attempt: unknown;
  lease_until: unknown;
  broker_id: unknown;
  topic: unknown;
  remark: unknown;
  result: unknown;
  created_at: unknown;
  updated_at: unknown;
}

export function toRecord(row: Row): LedgerRecord {
  const lease = nullableNumber(row.lease_until);
  return {
    group: columnText(row.consumer_group),
    key: columnText(row.msg_key),
    status: columnText(row.status) as LedgerStatus,
    fingerprint: nullableText(row.fingerprint),
    owner: nullableText(row.owner),
    attempt: Number(row.attempt),
    leaseUntil: lease === null ? null : new Date(lease),
    brokerId: nullableText(row.broker_id),
    topic: nullableText(row.topic),
    remark: nullableText(row.remark),
    result: nullableText(row.result),
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
  };
}

export function checkBytes(value: string, max: number, what: string): void {
  if (Buffer.byteLength(value, 'utf8') > max) {
    throw new PermanentError(
      'invalid-key',
      `the ${what} is longer than ${max} UTF-8 bytes; pass keys through normalizeKey() before the ledger`,
    );
  }
}

/**
 * Claims `request` on `db` (inside a transaction when `locking`: the existing row is read with
 * FOR UPDATE, the latest committed version, whatever the transaction's snapshot). Throws driver
 * errors raw so the caller can tell a lock conflict from a failure.
 */
export async function claimOnMysql(
  db: MysqlConnectionLike | MysqlPoolLike,
  s: MysqlStatements,
  request: ClaimRequest,
  status: 'PROCESSING' | 'SUCCESS',
  locking: boolean,
  clock: () => number,
): Promise<ClaimResult> {
  checkBytes(request.key, MYSQL_KEY_BYTES, 'key');
  checkBytes(request.group, MYSQL_GROUP_BYTES, 'group');
  let record: LedgerRecord | undefined;
  for (let i = 0; i < CLAIM_RACE_ATTEMPTS; i++) {
    const round = new ClaimRound(request, status, clock());
    const [inserted] = await db.execute(s.insert, round.insertValues());
    const ok = header(inserted);
    if (ok.insertId === 0) {
      if (ok.affectedRows !== 1) {
        throw new LedgerUnavailableError(`claim insert reported ${ok.affectedRows} rows and no duplicate`);
      }
      return round.acquired();
    }
    const [found] = await db.execute(locking ? s.selectForUpdate : s.select, [request.group, request.key]);
    const row = rows<Row>(found)[0];
    if (row === undefined) continue;
    record = toRecord(row);
    const answer = round.existing(record);
    if (answer !== undefined) return answer;
    const [taken] = await db.execute(s.reclaim, round.reclaimValues(record));
    if (matchedRows(taken) === 1) return round.reclaimed(record);
  }
  return lostEveryRound(request, record);
}
