/**
 * A ledger at tens of millions of rows. Per backend (PostgreSQL plain, PostgreSQL daily-partitioned,
 * MariaDB), in a database of the suite's own: the loaded table is bulk-filled to each size in turn
 * (rows as the ledger writes them, bench/scale-rows.ts), and at each size one-by-one claims, batch
 * claims and replays of loaded events run on it side by side with the same claims on an empty table.
 * Then, at the largest size, a retention pass deletes the expired fifth of the rows while claims run.
 * The loaded tables are dropped after each backend, the database at the end.
 *
 *   npm run bench -- scale [--json] [--seconds N] [--flag backends=postgres,postgres-daily,mysql]
 *     [--flag sizes=1000000,10000000,50000000] [--flag sizes.mysql=…] [--flag sizes.postgres-daily=…]
 *     [--flag concurrency=8] [--flag batch=100] [--flag batchConcurrency=2] [--flag rounds=2]
 *     [--flag purge=1] [--flag purgeBatch=1000] [--flag purgeSeconds=N] [--flag fill=rebuild|indexed] [--flag database=oncemq_scale]
 *
 * `--seconds` is the claims' time at each size (all rows of a size share it).
 */
import { resolveServiceUrl } from '../src/cli/connection.js';
import { listFlag, wholeFlag } from './flags.js';
import type { Suite } from './harness.js';
import { machine, measureClaims, type ClaimShape, type ScaleResult } from './scale-claims.js';
import { mysqlScaleTarget } from './scale-mysql.js';
import { openPostgresScale, postgresScaleTarget } from './scale-postgres.js';
import { measurePurge } from './scale-purge.js';
import { purgeCutoff, spanEnd } from './scale-rows.js';
import type { FillMethod, ScaleTarget } from './scale-target.js';

const BACKENDS = ['postgres', 'postgres-daily', 'mysql'] as const;
const DEFAULT_SIZES = [1_000_000, 10_000_000, 50_000_000];

/** The sizes of `flags[name]` (comma-separated whole numbers, growing), else `fallback`. */
function sizesFlag(
  flags: Readonly<Record<string, string>>,
  name: string,
  fallback: readonly number[],
): number[] {
  const text = flags[name];
  if (text === undefined) return [...fallback];
  const sizes = text.split(',').map((part) => Number(part.trim()));
  if (sizes.some((n, i) => !Number.isInteger(n) || n < 1 || (i > 0 && n <= (sizes[i - 1] ?? 0)))) {
    throw new Error(`--flag ${name}=${text}: expected growing whole numbers`);
  }
  return sizes;
}

interface ScaleRun {
  readonly sizes: readonly number[];
  readonly shape: ClaimShape;
  readonly seconds: number;
  readonly rounds: number;
  readonly purge: boolean;
  readonly purgeBatch: number;
  readonly purgeSeconds: number | undefined;
  readonly method: FillMethod;
}

/** Fills, measures and purges one backend; drops its tables at the end. */
async function runTarget(target: ScaleTarget, run: ScaleRun): Promise<ScaleResult[]> {
  const results: ScaleResult[] = [];
  // A long run reports each row on stderr as it comes, so that a run cut short keeps what it measured.
  const push = results.push.bind(results);
  results.push = (...rows: ScaleResult[]): number => {
    for (const row of rows) console.error(`scale row ${JSON.stringify(row)}`);
    return push(...rows);
  };
  const end = spanEnd(Date.now());
  const empty = target.ledger('empty_ledger');
  const big = target.ledger('big_ledger');
  const rival = target.ledger('big_ledger');
  try {
    // One after the other: two tables' first migrations in one new schema race on CREATE SCHEMA.
    for (const ledger of [empty, big, rival]) await ledger.init();
    await target.prepare('big_ledger', end);
    let loaded = 0;
    for (const size of run.sizes) {
      const load = machine();
      const started = performance.now();
      await target.fill('big_ledger', loaded, size, end, run.method);
      await target.analyze('big_ledger');
      const fillMs = performance.now() - started;
      const counted = await target.count('big_ledger');
      const bytes = await target.bytes('big_ledger');
      results.push({
        name: `${target.name}:${size}:fill`,
        concurrency: 1,
        messagesPerSecond: Math.round(((size - loaded) * 1000) / fillMs),
        messages: size - loaded,
        note: `bulk load (${run.method}), rows/s; then ANALYZE`,
        tableRows: counted,
        fillSeconds: Number((fillMs / 1000).toFixed(1)),
        ...bytes,
        bytesPerRow: Math.round((bytes.tableBytes + bytes.indexBytes) / counted),
        ...load,
      });
      loaded = size;
      await target.clear('empty_ledger');
      results.push(
        ...(await measureClaims({
          target: target.name,
          big,
          empty,
          loaded,
          shape: run.shape,
          seconds: run.seconds,
          rounds: run.rounds,
        })),
      );
    }
    if (run.purge && loaded > 0) {
      results.push(
        ...(await measurePurge({
          target,
          ledger: big,
          rival,
          tableRows: loaded,
          cutoffMs: purgeCutoff(end),
          batchSize: run.purgeBatch,
          concurrency: run.shape.concurrency,
          baselineSeconds: Math.max(5, run.seconds / 4),
          ...(run.purgeSeconds === undefined ? {} : { purgeSeconds: run.purgeSeconds }),
        })),
      );
    }
  } finally {
    await Promise.allSettled([empty.close(), big.close(), rival.close()]);
    await target.drop();
  }
  return results;
}

export const suite: Suite = {
  name: 'scale',
  description: 'claims on a ledger bulk-filled to 1M, 10M and 50M rows against an empty one; a purge at size',
  async run({ seconds, flags }) {
    const backends = listFlag(flags, 'backends', BACKENDS, BACKENDS);
    const shape: ClaimShape = {
      concurrency: wholeFlag(flags, 'concurrency', 8),
      batch: wholeFlag(flags, 'batch', 100),
      batchConcurrency: wholeFlag(flags, 'batchConcurrency', 2),
    };
    const fill = listFlag(flags, 'fill', ['rebuild', 'indexed'], ['rebuild'])[0];
    const method: FillMethod = fill === 'indexed' ? 'indexed' : 'rebuild';
    const common = {
      shape,
      seconds,
      rounds: wholeFlag(flags, 'rounds', 2),
      purge: wholeFlag(flags, 'purge', 1, 0) === 1,
      purgeBatch: wholeFlag(flags, 'purgeBatch', 1000),
      purgeSeconds: flags.purgeSeconds === undefined ? undefined : wholeFlag(flags, 'purgeSeconds', 0),
      method,
    };
    const database = flags.database ?? 'oncemq_scale';
    const sizes = sizesFlag(flags, 'sizes', DEFAULT_SIZES);
    const poolSize = shape.concurrency + shape.batchConcurrency * 2 + 4;
    const results: ScaleResult[] = [];
    const postgres = backends.filter((b) => b !== 'mysql');
    if (postgres.length > 0) {
      const { url } = resolveServiceUrl('postgres');
      const db = await openPostgresScale(url, database, poolSize);
      try {
        for (const backend of postgres) {
          const partitioned = backend === 'postgres-daily';
          const target = postgresScaleTarget(db.pool, partitioned ? 'daily' : 'plain', partitioned);
          results.push(
            ...(await runTarget(target, { ...common, sizes: sizesFlag(flags, `sizes.${backend}`, sizes) })),
          );
        }
      } finally {
        await db.drop();
      }
    }
    if (backends.includes('mysql')) {
      const { url } = resolveServiceUrl('mysql');
      const target = await mysqlScaleTarget(url, database, poolSize);
      try {
        results.push(
          ...(await runTarget(target, { ...common, sizes: sizesFlag(flags, 'sizes.mysql', sizes) })),
        );
      } finally {
        await target.close();
      }
    }
    return results;
  },
};
