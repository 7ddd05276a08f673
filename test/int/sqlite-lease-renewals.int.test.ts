import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPipeline, LedgerUnavailableError, type Claim, type Ledger, type Outcome } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { payment, paymentEnvelope, scratchFileEachTest, sleep } from '../support/points.js';

const key = { jsonPath: 'eventId' } as const;
const LEASE_MS = 300;

/** The owner's ledger with its renewals changed: `renew(n, forward)` answers renewal number n (from 1). */
function renewing(
  ledger: SqliteLedger,
  renew: (n: number, forward: () => Promise<Claim>) => Promise<Claim>,
): Ledger {
  let renewals = 0;
  return new Proxy(ledger, {
    get(target, property, receiver) {
      if (property === 'renew') {
        return (claim: Claim, leaseMs: number) => renew(++renewals, () => target.renew(claim, leaseMs));
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

interface Race {
  readonly outcome: Outcome;
  /** Fake-clock instant the owner's signal aborted, relative to its claim; undefined if it never did. */
  readonly abortedAfterMs: number | undefined;
  /** Fake-clock instant the rival won the key, relative to the owner's claim; undefined if it never did. */
  readonly rivalWonAfterMs: number | undefined;
  /** Whether the owner's signal had aborted when the rival won. */
  readonly abortedWhenRivalWon: boolean | undefined;
}

/** The owner's event loop stops for `forMs` at `atMs` after the claim, while the rival's does not. */
interface Stall {
  readonly atMs: number;
  readonly forMs: number;
}

/**
 * On the fake clock: an owner holds evt-1 for `holdMs` (its handler honours its signal) while a rival
 * ledger on the same file claims the key every millisecond; one millisecond at a time, so every
 * renewal, abort and rival claim happens at an exact instant. A stall is the rival claiming once
 * `forMs` ahead of the owner's clock: the owner's timers have not run for that long.
 */
async function race(
  path: string,
  owner: (ledger: SqliteLedger) => Ledger,
  renewEvery: number,
  holdMs: number,
  stall?: Stall,
) {
  const clock = (): number => Date.now();
  let rivalAheadMs = 0;
  const mine = new SqliteLedger({ database: path, clock });
  const rival = new SqliteLedger({ database: path, clock: () => Date.now() + rivalAheadMs });
  await rival.init();
  let claimedAt = 0;
  let abortedAt: number | undefined;
  let signal: AbortSignal | undefined;
  const running = createPipeline({
    ledger: owner(mine),
    group: 'mail',
    mode: 'leased',
    key,
    lease: LEASE_MS,
    renewEvery,
    handler: async (_message, ctx) => {
      claimedAt = Date.now();
      signal = ctx.signal;
      ctx.signal.addEventListener('abort', () => (abortedAt = Date.now()));
      for (let t = 0; t < holdMs && !ctx.signal.aborted; t++) await sleep(1);
      if (ctx.signal.aborted) throw ctx.signal.reason as Error;
    },
  }).process(paymentEnvelope(payment(1)));
  let outcome: Outcome | undefined;
  void running.then((done) => (outcome = done));
  while (signal === undefined) await vi.advanceTimersByTimeAsync(1);
  let rivalWonAt: number | undefined;
  let abortedWhenRivalWon: boolean | undefined;
  while (outcome === undefined || rivalWonAt === undefined) {
    if (rivalWonAt === undefined && Date.now() - claimedAt < holdMs + LEASE_MS) {
      rivalAheadMs = stall !== undefined && Date.now() - claimedAt === stall.atMs ? stall.forMs : 0;
      const answer = await rival.claim({
        group: 'mail',
        key: 'evt-1',
        fingerprint: null,
        brokerId: 'rival',
        topic: 'payments',
        leaseMs: LEASE_MS,
      });
      if (answer.status === 'acquired' || answer.status === 'reclaimed') {
        rivalWonAt = Date.now();
        abortedWhenRivalWon = signal.aborted;
      }
    } else if (rivalWonAt === undefined) {
      break;
    }
    await vi.advanceTimersByTimeAsync(1);
  }
  await mine.close();
  await rival.close();
  return {
    outcome: outcome ?? (await running),
    abortedAfterMs: abortedAt === undefined ? undefined : abortedAt - claimedAt,
    rivalWonAfterMs: rivalWonAt === undefined ? undefined : rivalWonAt - claimedAt,
    abortedWhenRivalWon,
  } satisfies Race;
}

describe('lease renewals at the edge of the lease, on a SQLite ledger', () => {
  const scratch = scratchFileEachTest('app.db');

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps a lease whose renewal came back later than renewEvery, renewing again at once', async () => {
    // Claimed at 0, renewEvery a third of the lease: the renewal sent at 100 waits 140 ms before it
    // reaches the database (longer than renewEvery, as renewals behind a rival's locks did in
    // `npm run bench -- leases`). The next is due 100 ms after the late one was *sent*, so it goes out
    // as soon as that one lands (240), well before the lease would be given up (350).
    const owner = (ledger: SqliteLedger) =>
      renewing(ledger, async (n, forward) => {
        if (n === 1) await sleep(140);
        return forward();
      });
    const result = await race(scratch.path, owner, 100, 1200);
    expect(result.abortedAfterMs).toBeUndefined();
    expect(result.rivalWonAfterMs).toBeUndefined();
    expect(result.outcome).toMatchObject({ kind: 'executed', leaseLost: false });
  });

  it('sends a failed renewal again after a short backoff, and keeps the lease', async () => {
    // Five renewals in a row fail (100, 110, 130, 155, 180 ms); the sixth lands before the lease is given up.
    const owner = (ledger: SqliteLedger) =>
      renewing(ledger, (n, forward) =>
        n <= 5 ? Promise.reject(new LedgerUnavailableError('database is locked')) : forward(),
      );
    const result = await race(scratch.path, owner, 100, 1200);
    expect(result.abortedAfterMs).toBeUndefined();
    expect(result.rivalWonAfterMs).toBeUndefined();
    expect(result.outcome).toMatchObject({ kind: 'executed', leaseLost: false });
  });

  it('aborts the signal before the lease ends when a renewal is held back past it, and only then can a rival win', async () => {
    // Claimed at 0, the renewal sent at 100 never lands in time: the lease ends at 300, and the signal
    // aborts a quarter of the renewal window (50 ms) before, so that an owner whose event loop then
    // stalls for 40 ms at 280 (a synchronous SQLite write waiting on the lock) has already stopped
    // when the rival claims at 320.
    const owner = (ledger: SqliteLedger) =>
      renewing(ledger, async (n, forward) => {
        if (n === 1) await sleep(1000);
        return forward();
      });
    const result = await race(scratch.path, owner, 100, 1200, { atMs: 280, forMs: 40 });
    expect(result.abortedAfterMs).toBe(LEASE_MS - 50);
    expect(result.rivalWonAfterMs).toBeGreaterThanOrEqual(result.abortedAfterMs ?? Infinity);
    expect(result.abortedWhenRivalWon).toBe(true);
    expect(result.outcome).toMatchObject({
      kind: 'retry',
      nextDeliveryCount: 1,
      error: { name: 'LeaseLostError' },
    });
  });
});
