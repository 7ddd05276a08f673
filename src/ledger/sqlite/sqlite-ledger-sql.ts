import { quoteIdentifier } from '../sql-identifier.js';
import { ownedWriteSql, type OwnedWrite } from '../sql-leases.js';
import type { SqliteDatabaseLike, SqliteStatementLike } from './sqlite-database.js';

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
  const inserts = new Map<number, SqliteStatementLike>();
  const owned = ownedWriteSql(t, () => '?');
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
    /** The owner-checked writes; bind their values, then group, key, owner and attempt. */
    owned: Object.fromEntries(Object.entries(owned).map(([name, sql]) => [name, db.prepare(sql)])) as Record<
      OwnedWrite,
      SqliteStatementLike
    >,
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
    /** Deletes a stuck or failed row. */
    reset: db.prepare(
      `DELETE FROM ${t} WHERE consumer_group = ? AND msg_key = ? AND status IN ('PROCESSING', 'FAIL')`,
    ),
    /** Deletes any row, a finished one included. */
    resetForce: db.prepare(`DELETE FROM ${t} WHERE consumer_group = ? AND msg_key = ?`),
  };
}
