import { LedgerUnavailableError } from '../../core/errors.js';
import { CLAIM_RACE_ATTEMPTS } from '../claim-decision.js';
import { ClaimRound, lostEveryRound } from '../claim-round.js';
import type { ClaimRequest, ClaimResult, LedgerRecord } from '../ledger.js';
import { EPOCH_MS_COLUMNS, rowToRecord, type LedgerRow } from '../ledger-row.js';
import { header, matchedRows, rows, type MysqlConnectionLike, type MysqlPoolLike } from './mysql-client.js';
import type { MysqlStatements } from './mysql-schema.js';

/** The record of a row mysql2 returned (VARBINARY as Buffer, BIGINT as number or string). */
export function mysqlRecord(row: LedgerRow): LedgerRecord {
  return rowToRecord(row, EPOCH_MS_COLUMNS);
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
    const row = rows<LedgerRow>(found)[0];
    if (row === undefined) continue;
    record = mysqlRecord(row);
    const answer = round.existing(record);
    if (answer !== undefined) return answer;
    const [taken] = await db.execute(s.reclaim, round.reclaimValues(record));
    if (matchedRows(taken) === 1) return round.reclaimed(record);
  }
  return lostEveryRound(request, record);
}
