import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'vitest';
import type { Ledger } from 'oncemq';

/**
 * Starts a purger script (a retention pass in a process of its own); resolves once its output matches
 * `when`, with the process still running, so that a test can kill it there.
 */
export function startPurger(
  file: string,
  args: string[],
  when: (out: string) => boolean,
): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (when(out)) resolve(child);
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('exit', (code) =>
      reject(new Error(`the purger exited (${String(code)}) before the kill: ${err}`)),
    );
  });
}

/** A ledger row as a kill test compares it: `updated` in epoch ms, the other columns as read. */
export interface KilledRow {
  readonly status: string;
  readonly updated: number;
}

/**
 * What a killed pass may leave: each row of `before` either exactly as it was in `after`, or gone —
 * and then it was finished (not PROCESSING) and last updated before `cutoff`. Answers how many went.
 */
export function expectWholeOrGone<R extends KilledRow>(
  before: ReadonlyMap<string, R>,
  after: ReadonlyMap<string, R>,
  cutoff: number,
): number {
  expect(after.size).toBeLessThan(before.size);
  let deleted = 0;
  for (const [id, row] of before) {
    const left = after.get(id);
    if (left === undefined) {
      deleted++;
      expect(row.status, id).not.toBe('PROCESSING');
      expect(row.updated, id).toBeLessThan(cutoff);
    } else {
      expect(left, id).toEqual(row);
    }
  }
  expect(after.size + deleted).toBe(before.size);
  return deleted;
}

/** Replays of the live rows `new-<g>` of group `points` (every 97th): each answered with its stored result. */
export async function expectLiveReplays(ledger: Ledger, rows: number): Promise<void> {
  for (let g = 1; g <= rows; g += 97) {
    const replay = await ledger.transaction(
      {
        group: 'points',
        key: `new-${g}`,
        fingerprint: null,
        brokerId: `b-${g}`,
        topic: 't',
        leaseMs: 30_000,
      },
      () => 'a second effect',
    );
    expect(replay).toMatchObject({ status: 'duplicate', record: { result: `{"new":${g}}` } });
  }
}

/** Takes the maintenance lock a dead purger held, once the database has ended its session, and frees it. */
export async function expectLockTakenOver(ledger: Ledger): Promise<void> {
  let lock;
  for (let i = 0; i < 100 && lock === undefined; i++) {
    lock = await ledger.tryMaintenanceLock();
    if (lock === undefined) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(lock).toBeDefined();
  await lock?.release();
}

/** After the next pass: every expired finished row of `before` is gone, every other one is there. */
export function expectExpiredGone<R extends KilledRow>(
  before: ReadonlyMap<string, R>,
  final: ReadonlyMap<string, R>,
  cutoff: number,
): void {
  for (const [id, row] of before) {
    const expired = row.status !== 'PROCESSING' && row.updated < cutoff;
    expect(final.has(id), id).toBe(!expired);
  }
}

/**
 * The text of a purger script: `open` (imports from the built package's folder and a `ledger`, opened),
 * then one retention pass of `batchSize` rows a batch, printing `locked` once it runs and a line per
 * batch, until it is killed. Its argv ends with the retention's `olderThan` in ms.
 */
export function purgerScript(open: string, batchSize: number): string {
  return `import { RetryPolicy, startRetention } from './index.js';
${open}
await ledger.init();
const lock = await ledger.tryMaintenanceLock();
await lock.release();
const retention = startRetention(ledger, {
  every: '1h', olderThan: Number(process.argv.at(-1)), batchSize: ${batchSize}, retry: RetryPolicy.none(), replayMargin: 0,
  onProgress: (p) => process.stdout.write(p.done ? 'done\\n' : 'batch ' + p.deleted + '\\n'),
});
process.stdout.write('locked\\n');
await retention.runOnce();
`;
}
