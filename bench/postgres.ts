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
import { compareCases, type BenchCase, type BenchResult } from './harness.js';
import { createPipeline } from '../src/consumer/pipeline.js';
import { createEnvelope, type Envelope } from '../src/core/envelope.js';
import type { PgClientLike } from '../src/ledger/postgres-client.js';
import { PostgresLedger } from '../src/ledger/postgres-ledger.js';

export const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const USERS = 1000;
const BATCH = 100;

export async function run(options: { seconds: number; url?: string }): Promise<BenchResult[]> {
  const url = options.url ?? process.env.ONCEMQ_POSTGRES_URL ?? DEFAULT_POSTGRES_URL;
  const schema = `oncemq_bench_${randomBytes(4).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: url, max: 16 });
  const results: BenchResult[] = [];
  try {
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE "${schema}".points (user_id text PRIMARY KEY, balance bigint NOT NULL)`);
    await pool.query(
      `INSERT INTO "${schema}".points SELECT 'user-' || g, 0 FROM generate_series(0, ${USERS - 1}) AS g`,
    );
    const ledger = new PostgresLedger({ pool, schema });
    await ledger.init();
    // The raw baseline writes the same row shape into an identical table (same columns and indexes).
    await new PostgresLedger({ pool, schema, table: 'raw_ledger' }).init();
    const update = `UPDATE "${schema}".points SET balance = balance + 100 WHERE user_id = $1`;
    const rawInsert = `INSERT INTO "${schema}".raw_ledger (consumer_group, msg_key, status, fingerprint, owner, attempt, broker_id, topic, created_at, updated_at)
      VALUES ($1, $2, 'SUCCESS', $3, $4, 1, $5, $6, $7, $7) ON CONFLICT (consumer_group, msg_key) DO NOTHING RETURNING 1`;
    const rawBatchInsert = `INSERT INTO "${schema}".raw_ledger (consumer_group, msg_key, status, fingerprint, owner, attempt, broker_id, topic, created_at, updated_at)
      SELECT 'points', k, 'SUCCESS', NULL, NULL, 1, k, 'payments', $2, $2 FROM unnest($1::text[]) AS k
      ON CONFLICT (consumer_group, msg_key) DO NOTHING RETURNING msg_key`;

    const pipeline = createPipeline<PgClientLike, { eventId: string; userId: string }>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        await ctx.tx.query(update, [message.userId]);
      },
    });
    const daily = new PostgresLedger({ pool, schema, table: 'daily_ledger', partitioned: 'daily' });
    await daily.init();
    const partitionedPipeline = createPipeline<PgClientLike, { eventId: string; userId: string }>({
      ledger: daily,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        await ctx.tx.query(update, [message.userId]);
      },
    });
    const envelope = (run: string, n: number): Envelope =>
      createEnvelope({
        brokerId: `${run}-${n}`,
        topic: 'payments',
        body: { eventId: `${run}-${n}`, orderId: `order-${n}`, userId: `user-${n % USERS}`, amount: 100 },
      });
    // The raw consumer receives the same delivery and decodes it, as any consumer must.
    const decoder = new TextDecoder();
    const raw = async (run: string, n: number): Promise<void> => {
      const delivered = envelope(run, n);
      const message = JSON.parse(decoder.decode(delivered.body)) as { eventId: string; userId: string };
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
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
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
    // A batch credits its points with one statement: 100 messages of batch n go to one user.
    const creditMany = `UPDATE "${schema}".points SET balance = balance + 100 * $2::int WHERE user_id = $1`;
    const rawBatch = async (tag: string, n: number): Promise<void> => {
      const keys = Array.from({ length: BATCH }, (_, i) => `${tag}-${n}-${i}`);
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query<{ msg_key: string }>(rawBatchInsert, [keys, new Date()]);
        if (rows.length > 0) await client.query(creditMany, [`user-${n % USERS}`, rows.length]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
    const claimMany = async (tag: string, n: number): Promise<void> => {
      const requests = Array.from({ length: BATCH }, (_, i) => ({
        group: 'points',
        key: `${tag}-${n}-${i}`,
        fingerprint: null,
        brokerId: `${tag}-${n}-${i}`,
        topic: 'payments',
        leaseMs: 30_000,
      }));
      await ledger.transactionMany(requests, async (tx, won) => {
        if (won.length > 0) await tx.query(creditMany, [`user-${n % USERS}`, won.length]);
        return won.map(() => null);
      });
    };
    const batchOf = (run: string, n: number): Envelope[] =>
      Array.from({ length: BATCH }, (_, i) => envelope(run, n * BATCH + i));

    const single: BenchCase[] = [
      { name: 'raw', perOp: 1, op: raw },
      {
        name: 'oncemq:transactional',
        perOp: 1,
        op: async (tag, n) => {
          await pipeline.process(envelope(tag, n));
        },
      },
      {
        name: 'oncemq:transactional-partitioned',
        perOp: 1,
        op: async (tag, n) => {
          await partitionedPipeline.process(envelope(tag, n));
        },
      },
    ];
    const batched: BenchCase[] = [
      { name: 'raw:batch', perOp: BATCH, op: rawBatch },
      { name: 'oncemq:batch', perOp: BATCH, op: claimMany },
      {
        name: 'oncemq:processBatch',
        perOp: BATCH,
        op: async (tag, n) => {
          await pipeline.processBatch(batchOf(tag, n));
        },
      },
    ];
    await compareCases(single, 16, Math.min(2, options.seconds), 2); // warm-up: connections, prepared statements
    for (const concurrency of [1, 16])
      results.push(...(await compareCases(single, concurrency, options.seconds)));
    for (const concurrency of [1, 16])
      results.push(...(await compareCases(batched, concurrency, options.seconds)));
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await pool.end();
  }
  return results;
}
