import type { LedgerRecord, LedgerStatus } from '../ledger.js';
import { quoteIdentifier } from '../sql-identifier.js';
import type { SqliteDatabaseLike, SqliteStatementLike } from './sqlite-ledger.js';

export interface SqliteLedgerRow {
  consumer_group: string;
  msg_key: string;
  status: LedgerStatus;
  fingerprint: string | null;
  owner: string | null;
  attempt: number;
  lease_until: number | null;
  broker_id: string | null;
  topic: string | null;
  remark: string | null;
  result: string | null;
  created_at: number;
  updated_at: number;
}

export function toRecord(row: SqliteLedgerRow): LedgerRecord {
  return {
    group: row.consumer_group,
    key: row.msg_key,
    status: row.status,
    fingerprint: row.fingerprint,
    owner: row.owner,
    attempt: row.attempt,
    leaseUntil: row.lease_until === null ? null : new Date(row.lease_until),
    brokerId: row.broker_id,
    topic: row.topic,
    remark: row.remark,
    result: row.result,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

export function migrations(table: string): readonly string[] {
  const t = quoteIdentifier(table);
  return [
    `CREATE TABLE ${t} (
      consumer_group TEXT NOT NULL,
      msg_key TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('PROCESSING', 'SUCCESS', 'FAIL')),
      fingerprint TEXT,
      owner TEXT,
      attempt INTEGER NOT NULL DEFAULT 1,
      lease_until INTEGER,
      broker_id TEXT,
      topic TEXT,
      remark TEXT,
      result TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY (consumer_group, msg_key)
    );
    CREATE INDEX ${quoteIdentifier(`${table}_status_updated`)} ON ${t} (status, updated_at);
    CREATE INDEX ${quoteIdentifier(`${table}_status_lease`)} ON ${t} (status, lease_until);`,
  ];
}

export type Statements = ReturnType<typeof prepareStatements>;

export function prepareStatements(db: SqliteDatabaseLike, table: string) {
  const t = quoteIdentifier(table);
  const owned = `consumer_group = ? AND msg_key = ? AND owner = ? AND attempt = ? AND status = 'PROCESSING'`;
  const inserts = new Map<number, SqliteStatementLike>();
  return {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    savepoint: db.prepare('SAVEPOINT oncemq_claim'),
    releaseSavepoint: db.prepare('RELEASE oncemq_claim'),
    rollbackSavepoint: db.prepare('ROLLBACK TO oncemq_claim'),
    /** The claim; binds ClaimRound.insertValues(). */
    insert: db.prepare(
      `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?) ON CONFLICT (consumer_group, msg_key) DO NOTHING`,
    ),
    /** A batch claim's insert of `rows` rows; RETURNING names the rows it made. Prepared once per size. */
    insertMany: (rows: number): SqliteStatementLike => {
      let statement = inserts.get(rows);
      if (statement === undefined) {
        const values = Array.from({ length: rows }, () => "(?, ?, 'SUCCESS', ?, ?, 1, NULL, ?, ?, ?, ?)");
        statement = db.prepare(
          `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
           VALUES ${values.join(', ')} ON CONFLICT (consumer_group, msg_key) DO NOTHING RETURNING consumer_group, msg_key`,
        );
        inserts.set(rows, statement);
      }
      return statement;
    },
    select: db.prepare(`SELECT * FROM ${t} WHERE consumer_group = ? AND msg_key = ?`),
    /** Takes a failed or expired row over; binds ClaimRound.reclaimValues(). */
    reclaim: db.prepare(
      `UPDATE ${t} SET status = ?, owner = ?, attempt = attempt + 1, lease_until = ?, broker_id = ?, topic = ?,
         fingerprint = COALESCE(fingerprint, ?), updated_at = ?
       WHERE consumer_group = ? AND msg_key = ? AND status = ? AND attempt = ? AND owner IS ?`,
    ),
    storeResult: db.prepare(`UPDATE ${t} SET result = ? WHERE consumer_group = ? AND msg_key = ?`),
    renew: db.prepare(`UPDATE ${t} SET lease_until = ?, updated_at = ? WHERE ${owned}`),
    complete: db.prepare(
      `UPDATE ${t} SET status = 'SUCCESS', result = ?, remark = NULL, lease_until = NULL, updated_at = ? WHERE ${owned}`,
    ),
    fail: db.prepare(
      `UPDATE ${t} SET status = 'FAIL', remark = ?, lease_until = NULL, updated_at = ? WHERE ${owned}`,
    ),
    release: db.prepare(`DELETE FROM ${t} WHERE ${owned}`),
    recordFailure: db.prepare(
      `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, remark, created_at, updated_at)
       VALUES (?, ?, 'FAIL', ?, NULL, 1, NULL, ?, ?, ?, ?, ?)
       ON CONFLICT (consumer_group, msg_key) DO UPDATE SET
         attempt = attempt + 1, remark = excluded.remark, updated_at = excluded.updated_at
       WHERE status = 'FAIL'`,
    ),
    purge: db.prepare(
      `DELETE FROM ${t} WHERE rowid IN (
         SELECT rowid FROM ${t} WHERE status IN ('SUCCESS', 'FAIL') AND updated_at < ? LIMIT ?)`,
    ),
  };
}
