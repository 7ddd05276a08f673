import { MAX_LEDGER_KEY_BYTES } from '../claim-request.js';
import { listFilter } from '../list-filter.js';
import type { ListQuery } from '../ledger.js';
import { ownedWriteSql, type OwnedWrite } from '../sql-leases.js';
import { rows, type MysqlConnectionLike, type MysqlValue } from './mysql-client.js';
import { mysqlPurgeStatements } from './mysql-purge.js';

/**
 * The MySQL/MariaDB ledger's DDL and statements. Keys and groups are VARBINARY so that they compare
 * byte for byte: 'A' ≠ 'a' and trailing spaces count (utf8mb4_bin is a PAD SPACE collation on
 * MariaDB and MySQL 5.7, under which 'k' and 'k ' would collide on the primary key).
 */

/** The key column's width in bytes: the shared limit of every ledger (MAX_LEDGER_KEY_BYTES). */
const KEY_BYTES = MAX_LEDGER_KEY_BYTES;
/** The group column's width in bytes: GROUP_PATTERN allows 128 ASCII characters. */
const GROUP_BYTES = 128;

/**
 * Applies the migrations past the recorded version, on a connection that holds the migration lock.
 * DDL commits implicitly in MySQL: each statement is idempotent, and the version row comes last.
 */
export async function runMysqlMigrations(
  conn: MysqlConnectionLike,
  table: string,
  versions: string,
  clock: () => number,
): Promise<void> {
  await conn.query(
    `CREATE TABLE IF NOT EXISTS ${versions} (version INT NOT NULL PRIMARY KEY, applied_at BIGINT NOT NULL) ENGINE = InnoDB`,
  );
  const [current] = await conn.query(`SELECT COALESCE(MAX(version), 0) AS version FROM ${versions}`);
  const from = Number(rows<{ version: unknown }>(current)[0]?.version ?? 0);
  const steps = mysqlMigrations(table);
  for (let version = from + 1; version <= steps.length; version++) {
    for (const statement of steps[version - 1] ?? []) await conn.query(statement);
    await conn.execute(`INSERT INTO ${versions} (version, applied_at) VALUES (?, ?)`, [version, clock()]);
  }
}

/**
 * What a ledger that does not migrate finds: whether the database exists, and the recorded schema
 * version of the table (undefined when the table or its version table is missing). Reads only
 * `information_schema` before the version table, so nothing fails on a missing one.
 */
export async function mysqlSchemaVersion(
  conn: MysqlConnectionLike,
  database: string,
  table: string,
  versions: string,
): Promise<{ readonly database: boolean; readonly version: number | undefined }> {
  const [found] = await conn.execute(
    `SELECT (SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?) AS db,
       (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name IN (?, ?)) AS tables`,
    [database, database, table, `${table}_schema`],
  );
  const counts = rows<{ db: unknown; tables: unknown }>(found)[0];
  if (Number(counts?.db) === 0) return { database: false, version: undefined };
  if (Number(counts?.tables) !== 2) return { database: true, version: undefined };
  const [current] = await conn.query(`SELECT COALESCE(MAX(version), 0) AS version FROM ${versions}`);
  return { database: true, version: Number(rows<{ version: unknown }>(current)[0]?.version ?? 0) };
}

/** The statement and values of a `list` query (oldest update first). */
export function mysqlListQuery(select: string, query: ListQuery): { sql: string; values: MysqlValue[] } {
  const { where, values, limit } = listFilter(query, (deadline) => deadline.getTime());
  return { sql: `${select}${where} ORDER BY updated_at LIMIT ${limit}`, values };
}

/** Ordered migrations; version n is element n - 1. Each is a list of statements. */
export function mysqlMigrations(table: string): readonly (readonly string[])[] {
  return [
    [
      `CREATE TABLE IF NOT EXISTS ${table} (
        consumer_group VARBINARY(${GROUP_BYTES}) NOT NULL,
        msg_key VARBINARY(${KEY_BYTES}) NOT NULL,
        status VARCHAR(10) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        fingerprint VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
        owner VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
        attempt INT UNSIGNED NOT NULL DEFAULT 1,
        lease_until BIGINT NULL,
        broker_id VARCHAR(1024) NULL,
        topic VARCHAR(1024) NULL,
        remark TEXT NULL,
        result LONGTEXT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (consumer_group, msg_key),
        KEY status_updated (status, updated_at),
        KEY status_lease (status, lease_until),
        CHECK (status IN ('PROCESSING', 'SUCCESS', 'FAIL'))
      ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
    ],
  ];
}

/** SQL of every ledger statement, for one quoted table; `strict` prefixes writes with strict sql_mode. */
export function mysqlStatements(table: string, strict: (sql: string) => string) {
  const t = table;
  const owned = ownedWriteSql(t, () => '?');
  return {
    /**
     * The claim. On a duplicate the row is left as it is and LAST_INSERT_ID(attempt) makes the OK
     * packet's insert id the row's attempt (≥ 1); a fresh insert reports 0. This tells the two apart
     * under either CLIENT_FOUND_ROWS setting (with it, affectedRows is 1 in both cases), takes the
     * row's exclusive lock (a concurrent claim waits for the holder's transaction), and, unlike
     * INSERT IGNORE, fails on every other error. Binds ClaimRound.insertValues().
     */
    insert: strict(
      `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)
       ON DUPLICATE KEY UPDATE attempt = LAST_INSERT_ID(attempt)`,
    ),
    /** A batch claim: duplicates keep their row (owner included) and their exclusive lock is taken. */
    insertMany: (rows: number) =>
      strict(
        `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, created_at, updated_at)
         VALUES ${Array.from({ length: rows }, () => "(?, ?, 'SUCCESS', ?, ?, 1, NULL, ?, ?, ?, ?)").join(', ')}
         ON DUPLICATE KEY UPDATE attempt = attempt`,
      ),
    select: `SELECT * FROM ${t} WHERE consumer_group = ? AND msg_key = ?`,
    selectForUpdate: `SELECT * FROM ${t} WHERE consumer_group = ? AND msg_key = ? FOR UPDATE`,
    /** Takes a failed or expired row over; binds ClaimRound.reclaimValues(). */
    reclaim: strict(
      `UPDATE ${t} SET status = ?, owner = ?, attempt = attempt + 1, lease_until = ?, broker_id = ?, topic = ?,
         fingerprint = COALESCE(fingerprint, ?), updated_at = ?
       WHERE consumer_group = ? AND msg_key = ? AND status = ? AND attempt = ? AND owner <=> ?`,
    ),
    storeResult: strict(`UPDATE ${t} SET result = ? WHERE consumer_group = ? AND msg_key = ?`),
    /** The owner-checked writes; bind their values, then group, key, owner and attempt. */
    owned: Object.fromEntries(Object.entries(owned).map(([name, sql]) => [name, strict(sql)])) as Record<
      OwnedWrite,
      string
    >,
    recordFailure: strict(
      `INSERT INTO ${t} (consumer_group, msg_key, status, fingerprint, owner, attempt, lease_until, broker_id, topic, remark, created_at, updated_at)
       VALUES (?, ?, 'FAIL', ?, NULL, 1, NULL, ?, ?, ?, ?, ?)
       ON DUPLICATE KEY UPDATE
         attempt = IF(status = 'FAIL', attempt + 1, attempt),
         remark = IF(status = 'FAIL', ?, remark),
         updated_at = IF(status = 'FAIL', ?, updated_at)`,
    ),
    reset: `DELETE FROM ${t} WHERE consumer_group = ? AND msg_key = ? AND status IN ('PROCESSING', 'FAIL')`,
    resetForce: `DELETE FROM ${t} WHERE consumer_group = ? AND msg_key = ?`,
    purge: mysqlPurgeStatements(t),
    list: `SELECT * FROM ${t}`,
  };
}

export type MysqlStatements = ReturnType<typeof mysqlStatements>;

/** Strict sql_mode for one statement, without touching the session (MariaDB: SET STATEMENT). */
export const STRICT_SQL_MODE = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

export function strictStatement(flavor: 'mariadb' | 'mysql'): (sql: string) => string {
  if (flavor === 'mariadb') return (sql) => `SET STATEMENT sql_mode = '${STRICT_SQL_MODE}' FOR ${sql}`;
  // MySQL 8: an optimizer hint right after the verb; older servers read it as a comment.
  return (sql) => sql.replace(/^(\s*\w+)/, `$1 /*+ SET_VAR(sql_mode = '${STRICT_SQL_MODE}') */`);
}
