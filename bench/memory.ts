/**
 * Memory over a long drain: `messages` deliveries (1,000,000 by default) through the batch path on
 * PostgreSQL — `pipeline.processBatch` with a batch handler, `concurrency` batches of `batch` in flight —
 * and the same work by hand with raw pg (the `raw:batch` statements of the postgres suite). After every
 * `sampleEvery` messages the process collects its garbage and reads the used heap and the RSS; after the
 * warm-up (`warmup` messages) a least-squares line through the samples gives the growth per 100,000
 * messages. A flat heap grows by about nothing: a leak of one object per message shows as its size × 100,000.
 *
 *   npm run bench -- memory [--json] [--flag messages=1000000] [--flag warmup=100000]
 *     [--flag sampleEvery=50000] [--flag batch=100] [--flag concurrency=2] [--flag rows=oncemq,raw]
 */
import { randomBytes } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pg from 'pg';
import { resolveServiceUrl } from '../src/cli/connection.js';
import type { Envelope } from '../src/core/envelope.js';
import type { PgClientLike } from '../src/ledger/postgres/postgres-client.js';
import { PostgresLedger } from '../src/ledger/postgres/postgres-ledger.js';
import type { BenchResult, MemoryDrain, Suite } from './harness.js';
import { createPointsSchema } from './postgres-points.js';
import * as sql from './sql.js';

const MIB = 1024 * 1024;

/** The garbage collector, exposed for this process. */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

type Sample = MemoryDrain['samples'][number];

/** Slope of `y` over `x` by least squares, in `y` units per `per` of `x`. */
function slope(points: readonly { x: number; y: number }[], per: number): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const sxy = points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0);
  const sxx = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  return sxx === 0 ? 0 : (sxy / sxx) * per;
}

const round = (value: number, places = 2): number => Math.round(value * 10 ** places) / 10 ** places;

interface DrainPlan {
  readonly messages: number;
  readonly warmup: number;
  readonly sampleEvery: number;
  readonly batch: number;
  readonly concurrency: number;
}

/** Drains `plan.messages` through `handle` (one call per batch), sampling the memory as it goes. */
async function drain(
  name: string,
  plan: DrainPlan,
  handle: (batch: Envelope[], n: number) => Promise<void>,
): Promise<BenchResult> {
  const gc = collector();
  const tag = `${name.replace(/\W/g, '')}-${randomBytes(3).toString('hex')}`;
  const batches = Math.ceil(plan.messages / plan.batch);
  const samples: Sample[] = [];
  let next = 0;
  let done = 0;
  let sampledAt = 0;
  const sample = (): void => {
    gc();
    const usage = process.memoryUsage();
    samples.push({ messages: done, heapUsedMb: round(usage.heapUsed / MIB), rssMb: round(usage.rss / MIB) });
  };
  sample();
  const cpu = process.cpuUsage();
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (let n = next++; n < batches; n = next++) {
      const envelopes = sql.batchEnvelopes(tag, n).slice(0, plan.batch);
      await handle(envelopes, n);
      done += envelopes.length;
      if (done - sampledAt >= plan.sampleEvery) {
        sampledAt = done;
        sample();
      }
    }
  };
  await Promise.all(Array.from({ length: plan.concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  sample();
  const steady = samples.filter((s) => s.messages >= plan.warmup);
  const line = (pick: (s: Sample) => number): number =>
    round(
      slope(
        steady.map((s) => ({ x: s.messages, y: pick(s) })),
        100_000,
      ),
      3,
    );
  const first = steady[0] ?? samples[0];
  const last = samples[samples.length - 1];
  return {
    name,
    concurrency: plan.concurrency,
    messagesPerSecond: Math.round(done / seconds),
    messages: done,
    cpuMicrosPerMessage: round((used.user + used.system) / done),
    note: `batches of ${plan.batch}; heap and RSS after a collection every ${plan.sampleEvery} messages; growth per 100,000 messages fitted after ${plan.warmup}`,
    memory: {
      heapGrowthMbPer100k: line((s) => s.heapUsedMb),
      rssGrowthMbPer100k: line((s) => s.rssMb),
      heapMbAfterWarmup: first?.heapUsedMb ?? 0,
      heapMbAtEnd: last?.heapUsedMb ?? 0,
      rssMbAfterWarmup: first?.rssMb ?? 0,
      rssMbAtEnd: last?.rssMb ?? 0,
      samples,
    },
    loadAverage: round(loadavg()[0] ?? 0),
    cores: cpus().length,
  };
}

export const suite: Suite = {
  name: 'memory',
  description: 'heap and RSS over a drain of 1,000,000 messages through the batch path on PostgreSQL',
  async run({ flags }) {
    const number = (key: string, fallback: number): number => {
      const value = flags[key] === undefined ? fallback : Number(flags[key]);
      if (!Number.isInteger(value) || value < 1) throw new Error(`--flag ${key} must be a whole number ≥ 1`);
      return value;
    };
    const plan: DrainPlan = {
      messages: number('messages', 1_000_000),
      warmup: number('warmup', 100_000),
      sampleEvery: number('sampleEvery', 50_000),
      batch: Math.min(number('batch', sql.BATCH), sql.BATCH),
      concurrency: number('concurrency', 2),
    };
    const rows = (flags.rows ?? 'oncemq,raw').split(',');
    const { url } = resolveServiceUrl('postgres');
    const schema = `oncemq_bench_${randomBytes(4).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: url, max: plan.concurrency + 2 });
    try {
      const { insert: rawBatchInsert, creditMany } = await createPointsSchema(pool, schema);
      const ledger = new PostgresLedger({ pool, schema });
      await ledger.init();
      const inTransaction = sql.transactionRunner(() => pool.connect());
      const pipeline = sql.pointsBatchPipeline(ledger, (tx: PgClientLike, userId, count) =>
        tx.query(creditMany, [userId, count]),
      );
      const results: BenchResult[] = [];
      for (const row of rows) {
        if (row === 'oncemq') {
          results.push(
            await drain('oncemq:drain:batch', plan, async (batch) => {
              for (const outcome of await pipeline.processBatch(batch)) {
                if (outcome.kind !== 'executed') throw new Error(`unexpected outcome ${outcome.kind}`);
              }
            }),
          );
        } else if (row === 'raw') {
          results.push(
            await drain('raw:drain:batch', plan, (batch, n) =>
              inTransaction(async (client) => {
                const { keys, brokerIds } = sql.decodeBatch(batch);
                const { rows: won } = await client.query(rawBatchInsert, [keys, brokerIds, new Date()]);
                if (won.length > 0) await client.query(creditMany, [sql.userOf(n), won.length]);
              }),
            ),
          );
        } else {
          throw new Error(`--flag rows takes oncemq and raw, not '${row}'`);
        }
      }
      return results;
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await pool.end();
    }
  },
};
