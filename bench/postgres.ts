/**
 * PostgreSQL: the example's transaction (claim + business update) through oncemq and through raw pg,
 * side by side, at concurrency 1 and 16; and batches of 100: `oncemq:batch` is transactionMany with one
 * business statement per batch (against `raw:batch`, the same SQL through raw pg), `oncemq:processBatch`
 * the pipeline's processBatch with the per-message handler (one business statement per message).
 *
 *   npm run bench -- postgres [--json] [--seconds N]    (ONCEMQ_POSTGRES_URL, else the loopback default)
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { resolveServiceUrl } from '../src/cli/connection.js';
import type { PgClientLike } from '../src/ledger/postgres/postgres-client.js';
import { PostgresLedger } from '../src/ledger/postgres/postgres-ledger.js';
import type { Suite } from './harness.js';
import { createPointsSchema } from './postgres-points.js';
import * as sql from './sql.js';

export const suite: Suite = {
  name: 'postgres',
  description: 'claim + update through oncemq vs raw pg, c1 and c16; batches of 100',
  async run({ seconds }) {
    const { url } = resolveServiceUrl('postgres');
    const schema = `oncemq_bench_${randomBytes(4).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: url, max: 16 });
    try {
      const rawBatchSql = await createPointsSchema(pool, schema);
      const ledger = new PostgresLedger({ pool, schema });
      await ledger.init();
      const daily = new PostgresLedger({ pool, schema, table: 'daily_ledger', partitioned: 'daily' });
      await daily.init();
      const update = `UPDATE "${schema}".points SET balance = balance + 100 WHERE user_id = $1`;
      // A batch credits its points with one statement: the messages of batch n go to one user.
      const { creditMany, insert: rawBatchInsert } = rawBatchSql;
      const rawInsert = `INSERT INTO "${schema}".raw_ledger (consumer_group, msg_key, status, fingerprint, owner, attempt, broker_id, topic, created_at, updated_at)
        VALUES ($1, $2, 'SUCCESS', $3, $4, 1, $5, $6, $7, $7) ON CONFLICT (consumer_group, msg_key) DO NOTHING RETURNING 1`;

      const inTransaction = sql.transactionRunner(() => pool.connect());
      const raw = async (tag: string, n: number): Promise<void> => {
        const delivered = sql.envelope(tag, n);
        const message = sql.decode(delivered);
        await inTransaction(async (client) => {
          const { rowCount } = await client.query(rawInsert, [
            'points',
            message.eventId,
            null,
            null,
            delivered.brokerId,
            delivered.topic,
            new Date(),
          ]);
          if (rowCount === 1) await client.query(update, [message.userId]);
        });
      };
      const rawBatch = (tag: string, n: number): Promise<void> =>
        inTransaction(async (client) => {
          const { keys, brokerIds } = sql.decodeBatch(sql.batchEnvelopes(tag, n));
          const { rows } = await client.query(rawBatchInsert, [keys, brokerIds, new Date()]);
          if (rows.length > 0) await client.query(creditMany, [sql.userOf(n), rows.length]);
        });
      const credit = (tx: PgClientLike, userId: string): Promise<unknown> => tx.query(update, [userId]);
      const pipeline = sql.pointsPipeline(ledger, credit);

      const single: sql.SqlCase[] = [
        { name: 'raw', op: raw },
        sql.processCase('oncemq:transactional', pipeline),
        sql.processCase('oncemq:transactional-partitioned', sql.pointsPipeline(daily, credit)),
      ];
      const batched: sql.SqlCase[] = [
        { name: 'raw:batch', perOp: sql.BATCH, op: rawBatch },
        sql.transactionManyCase(ledger, (tx, userId, count) => tx.query(creditMany, [userId, count])),
        sql.processBatchCase(pipeline),
        sql.processBatchHandlerCase(
          sql.pointsBatchPipeline(ledger, (tx: PgClientLike, userId, count) =>
            tx.query(creditMany, [userId, count]),
          ),
        ),
      ];
      return await sql.measureGroups([single, batched], seconds);
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await pool.end();
    }
  },
};
