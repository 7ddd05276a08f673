/**
 * MySQL/MariaDB: the example's transaction (claim + business update) through oncemq and through raw
 * mysql2, side by side, at concurrency 1 and 16; and batches of 100: `oncemq:batch` is transactionMany
 * with one business statement per batch (against `raw:batch`, the same SQL through raw mysql2),
 * `oncemq:processBatch` the pipeline's processBatch with the per-message handler.
 *
 *   npm run bench -- mysql [--json] [--seconds N]    (ONCEMQ_MYSQL_URL, else the loopback default)
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { resolveServiceUrl } from '../src/cli/connection.js';
import { MysqlLedger } from '../src/ledger/mysql/mysql-ledger.js';
import type { Suite } from './harness.js';
import * as sql from './sql.js';

export const suite: Suite = {
  name: 'mysql',
  description: 'claim + update through oncemq vs raw mysql2, c1 and c16; batches of 100',
  async run({ seconds }) {
    const { url } = resolveServiceUrl('mysql');
    const suffix = randomBytes(4).toString('hex');
    const points = `bench_points_${suffix}`;
    const table = `bench_ledger_${suffix}`;
    const rawTable = `bench_raw_${suffix}`;
    const pool = mysql.createPool({ uri: url, connectionLimit: 16 });
    try {
      await pool.query(
        `CREATE TABLE ${points} (user_id VARCHAR(64) PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB`,
      );
      const users = Array.from({ length: sql.USERS }, (_, i) => [`user-${i}`, 0]);
      await pool.query(`INSERT INTO ${points} (user_id, balance) VALUES ?`, [users]);
      const ledger = new MysqlLedger<mysql.PoolConnection>({ pool, table });
      await ledger.init();
      // The raw baseline writes the same row shape into an identical table (same columns and indexes).
      await new MysqlLedger({ pool, table: rawTable }).init();
      const update = `UPDATE ${points} SET balance = balance + 100 WHERE user_id = ?`;
      // A batch credits its points with one statement: the messages of batch n go to one user.
      const creditMany = `UPDATE ${points} SET balance = balance + 100 * ? WHERE user_id = ?`;
      const rawInsert = `INSERT INTO ${rawTable} (consumer_group, msg_key, status, fingerprint, owner, attempt, broker_id, topic, created_at, updated_at)
        VALUES ('points', ?, 'SUCCESS', NULL, NULL, 1, ?, 'payments', ?, ?) ON DUPLICATE KEY UPDATE attempt = LAST_INSERT_ID(attempt)`;

      const inTransaction = sql.transactionRunner(() => pool.getConnection());
      const raw = async (tag: string, n: number): Promise<void> => {
        const delivered = sql.envelope(tag, n);
        const message = sql.decode(delivered);
        await inTransaction(async (conn) => {
          const now = Date.now();
          const [inserted] = await conn.execute<mysql.ResultSetHeader>(rawInsert, [
            message.eventId,
            delivered.brokerId,
            now,
            now,
          ]);
          if (inserted.insertId === 0) await conn.execute(update, [message.userId]);
        });
      };
      const rawBatch = (tag: string, n: number): Promise<void> =>
        inTransaction(async (conn) => {
          const now = Date.now();
          const owner = `${tag}-${n}`;
          const { keys, brokerIds } = sql.decodeBatch(sql.batchEnvelopes(tag, n));
          await conn.query(
            `INSERT INTO ${rawTable} (consumer_group, msg_key, status, owner, attempt, broker_id, topic, created_at, updated_at) VALUES ?
             ON DUPLICATE KEY UPDATE attempt = attempt`,
            [keys.map((k, i) => ['points', k, 'SUCCESS', owner, 1, brokerIds[i] ?? k, 'payments', now, now])],
          );
          const [found] = await conn.query<mysql.RowDataPacket[]>(
            `SELECT owner FROM ${rawTable} WHERE (consumer_group, msg_key) IN (?) FOR UPDATE`,
            [keys.map((k) => ['points', k])],
          );
          const inserted = found.filter((row) => String(row.owner) === owner).length;
          if (inserted > 0) await conn.execute(creditMany, [inserted, sql.userOf(n)]);
        });
      const pipeline = sql.pointsPipeline(ledger, (tx, userId) => tx.execute(update, [userId]));

      const single: sql.SqlCase[] = [
        { name: 'raw', op: raw },
        sql.processCase('oncemq:transactional', pipeline),
      ];
      const batched: sql.SqlCase[] = [
        { name: 'raw:batch', perOp: sql.BATCH, op: rawBatch },
        sql.transactionManyCase(ledger, (tx, userId, count) => tx.execute(creditMany, [count, userId])),
        sql.processBatchCase(pipeline),
        sql.processBatchHandlerCase(
          sql.pointsBatchPipeline(ledger, (tx, userId, count) => tx.execute(creditMany, [count, userId])),
        ),
      ];
      return await sql.measureGroups(ledger.capabilities.batchClaim ? [single, batched] : [single], seconds);
    } finally {
      await pool
        .query(`DROP TABLE IF EXISTS ${points}, ${table}, ${table}_schema, ${rawTable}, ${rawTable}_schema`)
        .catch(() => undefined);
      await pool.end();
    }
  },
};
