/**
 * Cleanup at size: the ledger's own retention (`startRetention`, one pass) deletes the loaded table's
 * expired rows while one-by-one claims run on it. Measured: the claims' latency during the pass
 * against the same claims just before it, the pass's batches, the database's lock waits (sampled
 * every 100 ms) and deadlocks, and whether a second retention on the same table ran at the same time.
 */
import { errorText } from '../src/core/errors.js';
import { RetryPolicy } from '../src/core/retry-policy.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { startRetention, type RetentionProgress } from '../src/ledger/retention.js';
import { summarize } from './harness.js';
import { claimNew, machine, type ScaleResult } from './scale-claims.js';
import type { ScaleTarget } from './scale-target.js';

/** Runs one-by-one claims on `ledger` at `concurrency` until `until` settles; answers their latencies. */
async function claimUntil(ledger: Ledger, concurrency: number, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => (done = true)).catch(() => undefined);
  const latencies: number[] = [];
  const worker = async (): Promise<void> => {
    while (!done) {
      const t0 = performance.now();
      await claimNew(ledger);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return latencies;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Purges the rows of `ledger` (the loaded table) older than `cutoffMs` with a retention pass of
 * `batchSize` while claims run; `rival` is a second ledger on the same table whose retention tries a
 * pass meanwhile. Answers the purge row and the two claim rows (baseline, during).
 */
export async function measurePurge(options: {
  readonly target: ScaleTarget;
  readonly ledger: Ledger;
  readonly rival: Ledger;
  readonly tableRows: number;
  readonly cutoffMs: number;
  readonly batchSize: number;
  readonly concurrency: number;
  readonly baselineSeconds: number;
  /** Stops the pass after the batch running at this many seconds (the rest is left for the next pass). */
  readonly purgeSeconds?: number;
}): Promise<ScaleResult[]> {
  const { target, ledger, rival, concurrency } = options;
  const baselineStarted = performance.now();
  const baseline = await claimUntil(ledger, concurrency, sleep(options.baselineSeconds * 1000));
  const baselineMs = performance.now() - baselineStarted;

  const now = Date.now();
  const retentionConfig = {
    every: '1h',
    olderThan: now - options.cutoffMs,
    batchSize: options.batchSize,
    retry: RetryPolicy.none(),
    replayMargin: 0,
    clock: () => now,
  };
  const batchMs: number[] = [];
  let last = performance.now();
  let first: { ms: number; deleted: number } | undefined;
  const retention = startRetention(ledger, {
    ...retentionConfig,
    onProgress: (progress: RetentionProgress) => {
      const at = performance.now();
      if (!progress.done || progress.batches > batchMs.length) batchMs.push(at - last);
      first ??= { ms: at - last, deleted: progress.deleted };
      last = at;
    },
  });
  const rivalRetention = startRetention(rival, retentionConfig);
  const deadlocksBefore = await target.deadlocks();
  let longestLockWaitMs = 0;
  let lockWaitSamples = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const waits = await target.lockWaits();
      if (waits.waiting > 0) lockWaitSamples++;
      longestLockWaitMs = Math.max(longestLockWaitMs, waits.longestMs);
      await sleep(100);
    }
  })();

  const started = performance.now();
  last = started;
  const pass = retention.runOnce();
  const cut = { early: false };
  const limit =
    options.purgeSeconds === undefined
      ? undefined
      : setTimeout(() => {
          cut.early = true;
          void retention.stop();
        }, options.purgeSeconds * 1000);
  const rivalPass = (async () => {
    while (batchMs.length === 0 && first === undefined) await sleep(5);
    return rivalRetention.runOnce();
  })();
  const during = await claimUntil(ledger, concurrency, pass);
  const result = await pass;
  clearTimeout(limit);
  const purgeMs = performance.now() - started;
  const rivalResult = await rivalPass;
  sampling = false;
  await sampler;
  await Promise.all([retention.stop(), rivalRetention.stop()]);
  // The deadlock counter is flushed at transaction end; give the statistics a moment.
  await sleep(1000);
  const deadlocks = (await target.deadlocks()) - deadlocksBefore;
  if (result.error !== undefined) throw new Error(`the purge failed: ${errorText(result.error)}`);

  const name = `${target.name}:${options.tableRows}`;
  const baselineRow = summarize(`${name}:purge:baseline`, concurrency, baseline.length, baselineMs, baseline);
  const duringRow = summarize(`${name}:purge:claims`, concurrency, during.length, purgeMs, during);
  const batches = summarize(`${name}:purge`, 1, result.deleted, purgeMs, batchMs);
  return [
    {
      ...baselineRow,
      tableRows: options.tableRows,
      note: 'one-by-one claims just before the purge',
      ...machine(),
    },
    {
      ...duringRow,
      tableRows: options.tableRows,
      baseline: baselineRow.name,
      ratio: Number((duringRow.messagesPerSecond / baselineRow.messagesPerSecond).toFixed(3)),
      p99Ratio: Number(((duringRow.p99Ms ?? 0) / (baselineRow.p99Ms ?? 1)).toFixed(3)),
      note: 'one-by-one claims while the purge ran',
      ...machine(),
    },
    {
      ...batches,
      tableRows: options.tableRows,
      note: `retention pass, batchSize ${options.batchSize}; p50/p99 are per batch; msg/s is rows deleted per second`,
      deleted: result.deleted,
      batches: result.batches,
      purgeSeconds: Number((purgeMs / 1000).toFixed(1)),
      firstBatchMs: Number((first?.ms ?? 0).toFixed(1)),
      firstBatchDeleted: first?.deleted ?? 0,
      maxBatchMs: Number(Math.max(0, ...batchMs).toFixed(1)),
      longestLockWaitMs: Number(longestLockWaitMs.toFixed(1)),
      lockWaitSamples,
      deadlocks,
      cutAfterSeconds: cut.early ? options.purgeSeconds : undefined,
      rivalSkipped: rivalResult.skipped,
      rivalDeleted: rivalResult.deleted,
      ...machine(),
    },
  ];
}
