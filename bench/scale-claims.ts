/**
 * The claims the `scale` suite times, through the ledger API the pipeline calls: `transaction()` of
 * one new event (one by one), `transactionMany()` of a batch of new events, and `transaction()` of
 * an event already in the loaded rows (a replay, answered `duplicate`). New events get random UUIDs
 * as keys, so they land on random index pages of the loaded table as real event ids do.
 */
import { randomUUID } from 'node:crypto';
import { loadavg, availableParallelism } from 'node:os';
import type { ClaimRequest, Ledger } from '../src/ledger/ledger.js';
import { sideBySide, type BenchResult, type Contender } from './harness.js';
import { loadedKey } from './scale-rows.js';

/** How the claims are run. */
export interface ClaimShape {
  /** Claims in flight at once, one by one. */
  readonly concurrency: number;
  /** Events per `transactionMany()`. */
  readonly batch: number;
  /** Batches in flight at once. */
  readonly batchConcurrency: number;
}

/** A `scale` row: a BenchResult with the size it ran at and its ratios to the empty table's row. */
export interface ScaleResult extends BenchResult {
  /** Rows in the table the row ran against (loaded rows; the claims add a few). */
  readonly tableRows?: number;
  /** This row's p99 over its baseline's (the empty table's). */
  readonly p99Ratio?: number;
  readonly [extra: string]: unknown;
}

/** A new event's claim request in `group` (the pipeline's shape: a fingerprint, the broker's id, the topic). */
export function newRequest(group = 'points'): ClaimRequest {
  const id = randomUUID();
  return {
    group,
    key: id,
    fingerprint: id.replaceAll('-', '').repeat(2),
    brokerId: `msg-${id}`,
    topic: 'payments',
    leaseMs: 30_000,
  };
}

/** Runs one `transaction()` of a new event; throws unless it was acquired. */
export async function claimNew(ledger: Ledger): Promise<void> {
  const result = await ledger.transaction(newRequest(), () => null);
  if (result.status !== 'acquired') throw new Error(`a new key's claim answered ${result.status}`);
}

/** The machine's load and cores, noted on every row (the machine is shared). */
export function machine(): { loadAverage: number; cores: number } {
  return { loadAverage: Number((loadavg()[0] ?? 0).toFixed(2)), cores: availableParallelism() };
}

function contenders(
  prefix: string,
  ledger: Ledger,
  loaded: number,
  shape: ClaimShape,
  replay: boolean,
): Contender[] {
  const rows: Contender[] = [
    { name: `${prefix}:single`, concurrency: shape.concurrency, op: () => claimNew(ledger) },
    {
      name: `${prefix}:batch`,
      concurrency: shape.batchConcurrency,
      perOp: shape.batch,
      note: `transactionMany of ${shape.batch}`,
      op: async () => {
        const requests = Array.from({ length: shape.batch }, () => newRequest());
        const results = await ledger.transactionMany(requests, (_tx, won) => won.map(() => null));
        if (results.some((r) => r.status !== 'acquired'))
          throw new Error('a new key of a batch was not acquired');
      },
    },
  ];
  if (replay) {
    rows.push({
      name: `${prefix}:replay`,
      concurrency: shape.concurrency,
      note: 'transaction() of a loaded event',
      op: async () => {
        const { group, key } = loadedKey(Math.floor(Math.random() * loaded));
        await ledger.transaction({ ...newRequest(group), key }, () => null);
      },
    });
  }
  return rows;
}

/**
 * Times claims on `big` (holding `loaded` rows) and on `empty` side by side, in alternating rounds
 * of one run, so that the machine's noise falls on both; each big row carries its ratios to the
 * empty table's row of the same shape.
 */
export async function measureClaims(options: {
  readonly target: string;
  readonly big: Ledger;
  readonly empty: Ledger;
  readonly loaded: number;
  readonly shape: ClaimShape;
  readonly seconds: number;
  readonly rounds: number;
}): Promise<ScaleResult[]> {
  const { target, big, empty, loaded, shape } = options;
  const emptyRows = contenders(`${target}:0`, empty, 0, shape, false);
  const bigRows = contenders(`${target}:${loaded}`, big, loaded, shape, true).map((c) => ({
    ...c,
    baseline: c.name.endsWith(':replay') ? `${target}:0:single` : c.name.replace(`:${loaded}:`, ':0:'),
  }));
  const all = [...emptyRows, ...bigRows];
  const results = await sideBySide(all, { seconds: options.seconds, rounds: options.rounds, warmupMs: 500 });
  const byName = new Map(results.map((r) => [r.name, r]));
  return results.map((row): ScaleResult => {
    const base = row.baseline === undefined ? undefined : byName.get(row.baseline);
    const tableRows = row.name.startsWith(`${target}:0:`) ? 0 : loaded;
    if (base === undefined) return { ...row, tableRows, ...machine() };
    return {
      ...row,
      tableRows,
      ratio: Number((row.messagesPerSecond / base.messagesPerSecond).toFixed(3)),
      p99Ratio: Number(((row.p99Ms ?? 0) / (base.p99Ms ?? 1)).toFixed(3)),
      ...machine(),
    };
  });
}
