import type { MysqlConnectionLike, MysqlPoolLike } from '../../sql/mysql-like.js';
import { unavailable, type OutboxSession } from '../outbox-session.js';
import { outboxColumns, type OutboxSql } from './outbox-sql.js';

function mysqlSession(pool: MysqlPoolLike): OutboxSession<unknown> {
  return {
    async transaction(work) {
      let conn: MysqlConnectionLike & { release(): void };
      try {
        conn = await pool.getConnection();
      } catch (error) {
        throw unavailable(error, 'connecting');
      }
      try {
        // Locking reads see the latest commit either way; plain reads too under READ COMMITTED.
        await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        await conn.query('START TRANSACTION');
        const value = await work(conn);
        await conn.query('COMMIT');
        return value;
      } catch (error) {
        await conn.query('ROLLBACK').catch(() => undefined);
        throw unavailable(error, 'in a transaction');
      } finally {
        conn.release();
      }
    },
  };
}

/**
 * The outbox on MySQL and MariaDB: no `UPDATE … RETURNING`, so the sequence is read back and the
 * claim is a locking read then an update; index names belong to the table.
 */
export const mysqlOutbox: OutboxSql = {
  schemas: false,
  notifies: false,
  skipLocked: ' FOR UPDATE SKIP LOCKED',
  readBeforeClaim: false,
  ddl: ({ messages, keys, index }) => [
    `CREATE TABLE IF NOT EXISTS ${messages} (${outboxColumns({ id: 'BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY', text: 'LONGTEXT', name: 'VARCHAR(255)', big: 'BIGINT', blob: 'LONGBLOB', int: 'INT' })}, ` +
      `UNIQUE KEY ${index('message')} (message_id), UNIQUE KEY ${index('order')} (ordering_key, seq), ` +
      `KEY ${index('pending')} (sent_at, id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
    `CREATE TABLE IF NOT EXISTS ${keys} (ordering_key VARCHAR(255) NOT NULL PRIMARY KEY, last_seq BIGINT NOT NULL) ` +
      'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin',
  ],
  nextSeq: (keys) =>
    `INSERT INTO ${keys} (ordering_key, last_seq) VALUES (?, 1) ON DUPLICATE KEY UPDATE last_seq = last_seq + 1`,
  readSeq: (keys) => `SELECT last_seq FROM ${keys} WHERE ordering_key = ?`,
  claim: undefined,
  cleanup: (messages, batch) => `DELETE FROM ${messages} WHERE sent_at < ? LIMIT ${batch}`,
  needs: 'a mysql2/promise Pool (its getConnection() is missing)',
  accepts: (database) => typeof (database as Partial<MysqlPoolLike> | null)?.getConnection === 'function',
  session: (database) => mysqlSession(database as MysqlPoolLike),
};
