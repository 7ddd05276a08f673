/**
 * Leases under contention: how often a rival takes a key while its owner's handler still runs with a
 * signal that has not aborted, per backend and lease/renewEvery ratio.
 *
 * Each round, one pipeline in this process claims `keys` keys in leased mode and holds each for
 * `hold` ms (several leases) while a rival process (bench/lease-rival.ts) claims the same keys on
 * the same ledger about every millisecond. Per row: `stolen` counts keys the rival won before the
 * owner's `ctx.signal` aborted — the owner was still working on a key another consumer had taken,
 * which the lease keeper exists to prevent; `lost` counts owners whose signal aborted (a renewal did
 * not land in time: safe, but the work is wasted); the renewals' latencies (p50/p99/max) are what
 * a contended write costs the keeper.
 *
 *   npm run bench -- leases [--json] [--flag backends=sqlite,postgres,mysql,redis] [--flag lease=300]
 *     [--flag renewEvery=100,75,60] [--flag rounds=20] [--flag keys=4] [--flag hold=1200]
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPipeline } from '../src/consumer/pipeline.js';
import { createEnvelope } from '../src/core/envelope.js';
import { ConfigError, errorText } from '../src/core/errors.js';
import type { Claim, Ledger } from '../src/ledger/ledger.js';
import type { BenchResult, Suite } from './harness.js';
import type { RivalOrder, RivalReport } from './lease-rival.js';
import {
  dropLeaseNamespace,
  LEASE_BACKENDS,
  openLeaseLedger,
  type LeaseBackend,
  type LeaseNamespace,
} from './lease-stores.js';

const GROUP = 'leases';

function numbers(flag: string | undefined, fallback: readonly number[]): number[] {
  const values = (flag ?? fallback.join(',')).split(',').map(Number);
  if (values.some((n) => !(n > 0))) throw new Error(`expected positive numbers, got '${flag ?? ''}'`);
  return values;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
}

/** The owner's ledger, timing every renewal it sends. */
function timingRenewals(ledger: Ledger, latencies: number[]): Ledger {
  return new Proxy(ledger, {
    get(target, property, receiver) {
      if (property === 'renew') {
        return async (claim: Claim, leaseMs: number) => {
          const t0 = performance.now();
          try {
            return await target.renew(claim, leaseMs);
          } finally {
            latencies.push(performance.now() - t0);
          }
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

class Rival {
  readonly #child: ChildProcess;
  readonly ready: Promise<void>;
  #pending: ((report: RivalReport) => void) | undefined;

  constructor(namespace: LeaseNamespace) {
    this.#child = fork(new URL('./lease-rival.js', import.meta.url), [namespace.backend, namespace.name], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.ready = new Promise((resolve, reject) => {
      this.#child.once('error', reject);
      this.#child.once('exit', (code) => reject(new Error(`the rival exited with ${String(code)}`)));
      this.#child.on('message', (message: 'ready' | RivalReport) => {
        if (message === 'ready') resolve();
        else this.#pending?.(message);
      });
    });
  }

  hammer(order: RivalOrder): Promise<RivalReport> {
    return new Promise((resolve) => {
      this.#pending = resolve;
      this.#child.send(order);
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.#child.removeAllListeners('exit');
      this.#child.once('exit', () => resolve());
      this.#child.send('stop');
    });
  }
}

interface Row {
  readonly backend: LeaseBackend;
  readonly leaseMs: number;
  readonly renewEveryMs: number;
  readonly rounds: number;
  readonly keys: number;
  readonly holdMs: number;
}

async function runRow(row: Row, namespace: LeaseNamespace): Promise<BenchResult> {
  const { ledger, close } = await openLeaseLedger(namespace);
  const rival = new Rival(namespace);
  const latencies: number[] = [];
  let stolen = 0;
  let lost = 0;
  let rivalClaims = 0;
  let held = 0;
  const lostReasons: Record<string, number> = {};
  const started = performance.now();
  try {
    await rival.ready;
    const aborted = new Map<string, number>();
    const begun = new Map<string, () => void>();
    const pipeline = createPipeline({
      ledger: timingRenewals(ledger, latencies),
      group: GROUP,
      mode: 'leased',
      key: { header: 'key' },
      lease: row.leaseMs,
      renewEvery: row.renewEveryMs,
      handler: (_message, ctx) => {
        const key = ctx.key;
        begun.get(key)?.();
        return new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, row.holdMs);
          ctx.signal.addEventListener('abort', () => {
            aborted.set(key, Date.now());
            const reason = errorText((ctx.signal.reason as Error).cause ?? ctx.signal.reason).replace(
              /\d+/g,
              'N',
            );
            lostReasons[reason] = (lostReasons[reason] ?? 0) + 1;
            clearTimeout(timer);
            resolve();
          });
        });
      },
    });
    for (let round = 0; round < row.rounds; round++) {
      const keys = Array.from({ length: row.keys }, (_, i) => `r${round}-k${i}`);
      const starts = keys.map((key) => new Promise<void>((resolve) => begun.set(key, resolve)));
      const outcomes = Promise.all(
        keys.map((key) =>
          pipeline.process(
            createEnvelope({ brokerId: `owner-${key}`, topic: 'leases', headers: { key }, body: {} }),
          ),
        ),
      );
      await Promise.all(starts);
      const report = await rival.hammer({
        keys,
        group: GROUP,
        untilMs: Date.now() + row.holdMs,
        leaseMs: row.leaseMs,
      });
      await outcomes;
      rivalClaims += report.claims;
      for (const key of keys) {
        held++;
        const wonAt = report.wonAt[key] ?? 0;
        const abortedAt = aborted.get(key) ?? 0;
        if (abortedAt > 0) lost++;
        if (wonAt > 0 && (abortedAt === 0 || wonAt < abortedAt)) stolen++;
      }
    }
    pipeline.close();
  } finally {
    await rival.stop();
    await close();
  }
  const elapsedMs = performance.now() - started;
  const sorted = [...latencies].sort((a, b) => a - b);
  const round2 = (n: number): number => Math.round(n * 100) / 100;
  return {
    name: `${row.backend}:lease=${row.leaseMs}ms:renewEvery=${row.renewEveryMs}ms`,
    concurrency: row.keys,
    messagesPerSecond: Math.round((held * 1000) / elapsedMs),
    messages: held,
    p50Ms: round2(percentile(sorted, 50)),
    p99Ms: round2(percentile(sorted, 99)),
    note: `stolen ${stolen}/${held}, lost ${lost}/${held}`,
    leases: {
      backend: row.backend,
      leaseMs: row.leaseMs,
      renewEveryMs: row.renewEveryMs,
      holdMs: row.holdMs,
      held,
      stolen,
      lost,
      renewals: latencies.length,
      renewMaxMs: round2(sorted.at(-1) ?? 0),
      rivalClaims,
      lostReasons,
    },
  };
}

export const suite: Suite = {
  name: 'leases',
  description:
    'a rival process claims held keys every ms: keys stolen from a running owner, per lease/renewEvery',
  async run({ flags }) {
    const backends = (flags.backends ?? LEASE_BACKENDS.join(',')).split(',') as LeaseBackend[];
    for (const backend of backends) {
      if (!LEASE_BACKENDS.includes(backend)) throw new Error(`unknown backend '${backend}'`);
    }
    const [leaseMs = 300] = numbers(flags.lease, [300]);
    const renewEvery = numbers(flags.renewEvery, [100, 75, 60]);
    const [rounds = 20] = numbers(flags.rounds, [20]);
    const [keys = 4] = numbers(flags.keys, [4]);
    const [holdMs = 1200] = numbers(flags.hold, [1200]);
    const results: BenchResult[] = [];
    for (const backend of backends) {
      for (const renewEveryMs of renewEvery) {
        const name = `oncemq_lease_${randomBytes(4).toString('hex')}`;
        const dir = backend === 'sqlite' ? mkdtempSync(join(tmpdir(), 'oncemq-leases-')) : undefined;
        const namespace: LeaseNamespace = {
          backend,
          name: dir === undefined ? name : join(dir, 'ledger.db'),
        };
        try {
          // The file exists (migrated) before the rival opens it.
          if (dir !== undefined) await (await openLeaseLedger(namespace)).close();
          const result = await runRow({ backend, leaseMs, renewEveryMs, rounds, keys, holdMs }, namespace);
          console.error(`${result.name}: ${result.note ?? ''}, renew p99 ${String(result.p99Ms)}ms`);
          results.push(result);
        } catch (error) {
          // A ratio the pipeline refuses (renewEvery over a third of the lease) has no row.
          if (!(error instanceof ConfigError)) throw error;
          console.error(
            `${backend}:lease=${leaseMs}ms:renewEvery=${renewEveryMs}ms: refused, ${error.message}`,
          );
        } finally {
          if (dir === undefined) await dropLeaseNamespace(namespace);
          else rmSync(dir, { recursive: true, force: true });
        }
      }
    }
    return results;
  },
};
