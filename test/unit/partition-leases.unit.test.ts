import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LOGGER } from 'oncemq';
import {
  NOT_RENEWED,
  PartitionLeases,
  TAKEN_OVER,
  type LeaseRound,
  type LeaseStore,
} from '../support/internal.js';

/** A lease store in memory: what each partition answers is set by the test. */
class ScriptedStore implements LeaseStore<'clean'> {
  /** Partitions another member holds: not taken, and renewals of them are refused. */
  readonly others = new Set<number>();
  /** While true, every write fails at the broker (neither renewed nor lost). */
  silent = false;
  readonly released: number[] = [];
  rounds = 0;

  round(held: readonly number[], free: readonly number[]): Promise<LeaseRound<'clean'>> {
    this.rounds++;
    if (this.silent) return Promise.resolve({ renewed: [], lost: [], taken: [] });
    return Promise.resolve({
      renewed: held.filter((index) => !this.others.has(index)),
      lost: held.filter((index) => this.others.has(index)),
      taken: free
        .filter((index) => !this.others.has(index))
        .map((index) => ({ index, predecessor: 'clean' as const })),
    });
  }

  release(index: number): Promise<void> {
    this.released.push(index);
    return Promise.resolve();
  }
}

const LEASE_MS = 3_000;

function leasesOver(store: ScriptedStore, count = 2) {
  const taken: number[] = [];
  const lost: { index: number; why: string; at: number }[] = [];
  const leases = new PartitionLeases(
    store,
    {
      taken: (index) => taken.push(index),
      lost: (index, why) => lost.push({ index, why, at: Date.now() }),
    },
    { count, leaseMs: LEASE_MS, logger: DEFAULT_LOGGER, group: 'g' },
  );
  return { leases, taken, lost };
}

describe('PartitionLeases: one renew / let-go rule', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it('takes the free partitions at start and renews them every third of the lease', async () => {
    const store = new ScriptedStore();
    store.others.add(1);
    const { leases, taken, lost } = leasesOver(store);
    await leases.start();
    expect(taken).toEqual([0]);
    expect([...leases.held]).toEqual([0]);
    await vi.advanceTimersByTimeAsync(LEASE_MS * 3);
    // One round at start, then one every third of the lease.
    expect(store.rounds).toBe(10);
    expect(lost).toEqual([]);
    expect(leases.letGoAt(0)).toBe(Date.now() + (LEASE_MS * 2) / 3);
    await leases.stop();
  });

  it('lets a partition go at once when a renewal is refused (another member holds it)', async () => {
    const store = new ScriptedStore();
    const { leases, lost } = leasesOver(store);
    await leases.start();
    store.others.add(0);
    await vi.advanceTimersByTimeAsync(LEASE_MS / 3);
    expect(lost).toEqual([{ index: 0, why: TAKEN_OVER, at: Date.now() }]);
    expect([...leases.held]).toEqual([1]);
    await leases.stop();
  });

  it('lets a partition go two thirds of a lease after the last renewal was sent, when renewals stop landing', async () => {
    const store = new ScriptedStore();
    const { leases, lost } = leasesOver(store, 1);
    await leases.start();
    const renewedAt = Date.now();
    store.silent = true;
    await vi.advanceTimersByTimeAsync((LEASE_MS * 2) / 3 - 1);
    expect(lost).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(lost).toEqual([{ index: 0, why: NOT_RENEWED, at: renewedAt + (LEASE_MS * 2) / 3 }]);
    expect(leases.held.size).toBe(0);
    // Before the broker's lease runs out: nobody else can have taken it yet.
    expect(lost[0]?.at).toBeLessThan(renewedAt + LEASE_MS);
    await leases.stop();
  });

  it('counts a round from the earlier time beforeRound gives, and ends the rounds when it says so', async () => {
    const store = new ScriptedStore();
    let go = true;
    const since = 1_000_000 - 500;
    const leases = new PartitionLeases(
      store,
      { taken: () => undefined, lost: () => undefined },
      {
        count: 1,
        leaseMs: LEASE_MS,
        logger: DEFAULT_LOGGER,
        group: 'g',
        beforeRound: () => Promise.resolve({ go, since }),
      },
    );
    await leases.start();
    expect(leases.letGoAt(0)).toBe(since + (LEASE_MS * 2) / 3);
    go = false;
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    const rounds = store.rounds;
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    expect(store.rounds).toBe(rounds);
    await leases.stop();
  });

  it('releases what it takes after the member stopped, and a released partition is no longer held', async () => {
    const store = new ScriptedStore();
    const { leases } = leasesOver(store);
    await leases.start();
    await leases.release(0, true);
    expect(store.released).toEqual([0]);
    expect([...leases.held]).toEqual([1]);
    await leases.stop();
  });
});
