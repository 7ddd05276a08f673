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
import { compareCases, type BenchCase, type BenchResult } from './harness.js';
import { createPipeline } from '../src/consumer/pipeline.js';
import { createEnvelope, type Envelope } from '../src/core/envelope.js';
import { MysqlLedger } from '../src/ledger/mysql-ledger.js';

export const DEFAULT_MYSQL_URL = 'mysql://root@127.0.0.1:3306/test';
const USERS = 1000;
const BATCH = 100;

export async function run(options: { seconds: number; url?: string }): Promise<BenchResult[]> {
  const url = options.url ?? process.env.ONCEMQ_MYSQL_URL ?? DEFAULT_MYSQL_URL;
  const suffix = randomBytes(4).toString('hex');
  const points = `bench_points_${suffix}`;
  const table = `bench_ledger_${suffix}`;
  const rawTable = `bench_raw_${suffix}`;
  const pool = mysql.createPool({ uri: url, connectionLimit: 16 });
  const results: BenchResult[] = [];
  try {
    await pool.query(
      `CREATE TABLE ${points} (user_id VARCHAR(64) PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB`,
    );
    const users = Array.from({ length: USERS }, (_, i) => [`user-${i}`, 0]);
    await pool.query(`INSERT INTO ${points} (user_id, balance) VALUES ?`, [users]);
    const ledger = new MysqlLedger<mysql.PoolConnection>({ pool, table });
    await ledger.init();
    // The raw baseline writes the same row shape into an identical table (same columns and indexes).
    await new MysqlLedger({ pool, table: rawTable }).init();
    const update = `UPDATE ${points} SET balance = balance + 100 WHERE user_id = ?`;
    const rawInsert = `INSERT INTO ${rawTable} (consumer_group, msg_key, status, fingerprint, owner, attempt, broker_id, topic, created_at, updated_at)
      VALUES ('points', ?, 'SUCCESS', NULL, NULL, 1, ?, 'payments', ?, ?) ON DUPLICATE KEY UPDATE attempt = LAST_INSERT_ID(attempt)`;

    const pipeline = createPipeline<mysql.PoolConnection, { eventId: string; userId: string }>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler: async (message, ctx) => {
        await ctx.tx.execute(update, [message.userId]);
      },
    });
    const envelope = (tag: string, n: number): Envelope =>
      createEnvelope({
        brokerId: `${tag}-${n}`,
        topic: 'payments',
        body: { eventId: `${tag}-${n}`, orderId: `order-${n}`, userId: `user-${n % USERS}`, amount: 100 },
      });
    // The raw consumer receives the same delivery and decodes it, as any consumer must.
    const decoder = new TextDecoder();
    const raw = async (tag: string, n: number): Promise<void> => {
      const delivered = envelope(tag, n);
      const message = JSON.parse(decoder.decode(delivered.body)) as { eventId: string; userId: string };
      const conn = await pool.getConnection();
      try {
        await conn.query('START TRANSACTION');
        const now = Date.now();
        const [inserted] = await conn.execute<mysql.ResultSetHeader>(rawInsert, [
          message.eventId,
          delivered.brokerId,
          now,
          now,
        ]);
        if (inserted.insertId === 0) await conn.execute(update, [message.userId]);
        await conn.query('COMMIT');
      } finally {
        conn.release();
      }
    };
    const single: BenchCase[] = [
      { name: 'raw', perOp: 1, op: raw },
      {
        name: 'oncemq:transactional',
        perOp: 1,
        op: async (tag, n) => {
          const outcome = await pipeline.process(envelope(tag, n));
          if (outcome.kind !== 'executed') throw new Error(`unexpected outcome ${outcome.kind}`);
        },
      },
    ];
    await compareCases(single, 16, Math.min(2, options.seconds), 2); // warm-up: connections, prepared statements
    for (const concurrency of [1, 16])
      results.push(...(await compareCases(single, concurrency, options.seconds)));

    if (ledger.capabilities.batchClaim) {
      // A batch credits its points with one statement: the 100 messages of batch n go to one user.
      const creditMany = `UPDATE ${points} SET balance = balance + 100 * ? WHERE user_id = ?`;
      const rawBatch = async (tag: string, n: number): Promise<void> => {
        const now = Date.now();
        const owner = `${tag}-${n}`;
        const keys = Array.from({ length: BATCH }, (_, i) => `${tag}-${n}-${i}`);
        const conn = await pool.getConnection();
        try {
          await conn.query('START TRANSACTION');
          await conn.query(
            `INSERT INTO ${rawTable} (consumer_group, msg_key, status, owner, attempt, broker_id, topic, created_at, updated_at) VALUES ?
             ON DUPLICATE KEY UPDATE attempt = attempt`,
            [keys.map((k) => ['points', k, 'SUCCESS', owner, 1, k, 'payments', now, now])],
          );
          const [found] = await conn.query<mysql.RowDataPacket[]>(
            `SELECT owner FROM ${rawTable} WHERE (consumer_group, msg_key) IN (?) FOR UPDATE`,
            [keys.map((k) => ['points', k])],
          );
          const inserted = found.filter((row) => String(row.owner) === owner).length;
          if (inserted > 0) await conn.execute(creditMany, [inserted, `user-${n % USERS}`]);
          await conn.query('COMMIT');
        } finally {
          conn.release();
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
          if (won.length > 0) await tx.execute(creditMany, [won.length, `user-${n % USERS}`]);
          return won.map(() => null);
        });
      };
      const batched: BenchCase[] = [
        { name: 'raw:batch', perOp: BATCH, op: rawBatch },
        { name: 'oncemq:batch', perOp: BATCH, op: claimMany },
        {
          name: 'oncemq:processBatch',
          perOp: BATCH,
          op: async (tag, n) => {
            await pipeline.processBatch(
              Array.from({ length: BATCH }, (_, i) => envelope(tag, n * BATCH + i)),
            );
          },
        },
      ];
      for (const concurrency of [1, 16])
        results.push(...(await compareCases(batched, concurrency, options.seconds)));
    }
  } finally {
    await pool
      .query(`DROP TABLE IF EXISTS ${points}, ${table}, ${table}_schema, ${rawTable}, ${rawTable}_schema`)
      .catch(() => undefined);
    await pool.end();
  }
  return results;
}

// Run directly (`node dist-bench/bench/mysql.js [--seconds N] [--json]`) until bench/run.ts dispatches suites.
if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const at = process.argv.indexOf('--seconds');
  const seconds = at > 0 ? Number(process.argv[at + 1]) : 10;
  const results = await run({ seconds });
  if (process.argv.includes('--json')) console.log(JSON.stringify(results));
  else console.table(results);
}
