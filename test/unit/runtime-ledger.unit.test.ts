import { describe, expect, it } from 'vitest';
import {
  ClosedError,
  ConfigError,
  LeaseLostError,
  LedgerUnavailableError,
  PermanentError,
  type ClaimRequest,
  type ClaimResult,
  type Logger,
} from 'oncemq';
import { type LedgerBackend, RuntimeLedger } from 'oncemq';

const request = (overrides: Partial<ClaimRequest> = {}): ClaimRequest => ({
  group: 'points',
  key: 'evt-1',
  fingerprint: 'fp',
  brokerId: 'b1',
  topic: 'payments',
  leaseMs: 30_000,
  ...overrides,
});

const won = (r: ClaimRequest): ClaimResult => ({
  status: 'acquired',
  claim: { group: r.group, key: r.key, owner: 'o', attempt: 1, leaseUntil: new Date(0) },
});

/** A backend that records what reaches it; open() settles with `opening` when given. */
function recordingBackend(overrides: Partial<LedgerBackend<string>> = {}, opening?: Promise<void>) {
  const seen: { opens: number; closes: number; requests: ClaimRequest[]; stored: (string | null)[] } = {
    opens: 0,
    closes: 0,
    requests: [],
    stored: [],
  };
  const backend: LedgerBackend<string> = {
    name: 'recording',
    retentionMs: 1000,
    open: () => {
      seen.opens++;
      return opening ?? Promise.resolve();
    },
    close: () => {
      seen.closes++;
      return Promise.resolve();
    },
    get: () => Promise.resolve(undefined),
    transactional: {
      async transaction(r, work) {
        seen.requests.push(r);
        const claimed = won(r);
        if (claimed.status === 'acquired') seen.stored.push(await work('tx', claimed.claim));
        return claimed;
      },
      recordFailure: (r) => {
        seen.requests.push(r);
        return Promise.resolve();
      },
    },
    ...overrides,
  };
  return { backend, seen };
}

function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

describe('RuntimeLedger: the one wrapper around every backend', () => {
  it('opens the backend once for concurrent init() calls and the first calls of other methods', async () => {
    const held = gate();
    const { backend, seen } = recordingBackend({}, held.promise);
    const ledger = new RuntimeLedger(backend);
    const calls = [ledger.init(), ledger.init(), ledger.get('points', 'evt-1'), ledger.init()];
    held.open();
    await Promise.all(calls);
    await ledger.init();
    expect(seen.opens).toBe(1);
  });

  it('runs a failed open again at the next call, and wraps its driver error with the cause', async () => {
    const boom = new Error('connection refused');
    let attempts = 0;
    const { backend, seen } = recordingBackend({
      open: () => (++attempts === 1 ? Promise.reject(boom) : Promise.resolve()),
    });
    const ledger = new RuntimeLedger(backend);
    const first: unknown = await ledger.init().catch((e: unknown) => e);
    expect(first).toBeInstanceOf(LedgerUnavailableError);
    expect((first as Error).cause).toBe(boom);
    expect((await ledger.transaction(request(), () => null)).status).toBe('acquired');
    expect(attempts).toBe(2);
    expect(seen.requests).toHaveLength(1);
  });

  it('refuses every method after close() with ClosedError, and closes the backend once', async () => {
    const { backend, seen } = recordingBackend();
    const ledger = new RuntimeLedger(backend);
    await ledger.init();
    await Promise.all([ledger.close(), ledger.close()]);
    await ledger.close();
    expect(seen.closes).toBe(1);
    const claim = { group: 'points', key: 'k', owner: 'o', attempt: 1, leaseUntil: new Date(0) };
    const calls: (() => Promise<unknown>)[] = [
      () => ledger.init(),
      () => ledger.transaction(request(), () => null),
      () => ledger.recordFailure(request(), 'x'),
      () => ledger.transactionMany([request()], () => []),
      () => ledger.claim(request()),
      () => ledger.renew(claim, 1),
      () => ledger.complete(claim, null),
      () => ledger.fail(claim, 'x'),
      () => ledger.release(claim),
      () => ledger.get('points', 'k'),
      () => ledger.list({}),
      () => ledger.reset('points', 'k'),
      () => ledger.tryMaintenanceLock(),
      () => ledger.purge({ olderThan: new Date() }),
    ];
    for (const call of calls) await expect(call()).rejects.toBeInstanceOf(ClosedError);
    expect(seen.requests).toHaveLength(0);
  });

  it('closes after an open in flight has settled, and never opens again', async () => {
    const held = gate();
    const { backend, seen } = recordingBackend({}, held.promise);
    const ledger = new RuntimeLedger(backend);
    const opening = ledger.init();
    const closing = ledger.close();
    expect(seen.closes).toBe(0);
    held.open();
    await opening;
    await closing;
    expect(seen.closes).toBe(1);
    await expect(ledger.init()).rejects.toBeInstanceOf(ClosedError);
    expect(seen.opens).toBe(1);
  });

  it('derives each capability from the one property that declares its feature', () => {
    const { backend } = recordingBackend({
      leased: {
        claim: (r) => Promise.resolve(won(r)),
        renew: () => Promise.resolve(new Date()),
        complete: () => Promise.resolve(true),
        fail: () => Promise.resolve(true),
        release: () => Promise.resolve(true),
      },
      purge: () => Promise.resolve({ deleted: 0, batches: 0 }),
      traits: { concurrentConnections: false },
    });
    expect(new RuntimeLedger(backend).capabilities).toEqual({
      transactional: true,
      leased: true,
      storesResult: true,
      concurrentConnections: false,
      purge: true,
      batchClaim: false,
      inspect: false,
      maintenanceLock: false,
    });
    expect(
      new RuntimeLedger({ ...backend, transactional: undefined, leased: undefined }).capabilities,
    ).toMatchObject({
      transactional: false,
      leased: false,
    });
  });

  it('answers a method of a missing feature with a ConfigError naming the capability, without opening', async () => {
    const { backend, seen } = recordingBackend({ transactional: undefined });
    const ledger = new RuntimeLedger(backend);
    await expect(ledger.transaction(request(), () => null)).rejects.toThrow(
      /capabilities.transactional is false/,
    );
    await expect(ledger.claim(request())).rejects.toThrow(/capabilities.leased is false/);
    await expect(ledger.transactionMany([], () => [])).rejects.toThrow(/capabilities.batchClaim is false/);
    await expect(ledger.list({})).rejects.toThrow(/capabilities.inspect is false/);
    await expect(ledger.tryMaintenanceLock()).rejects.toThrow(/capabilities.maintenanceLock is false/);
    await expect(ledger.purge({ olderThan: new Date() })).rejects.toBeInstanceOf(ConfigError);
    expect(seen.opens).toBe(0);
    expect(() => new RuntimeLedger({ ...backend, batchClaim: () => Promise.resolve([]) })).toThrow(
      ConfigError,
    );
  });

  it("wraps a driver error that escapes the backend, and passes whatever the caller's work throws unchanged", async () => {
    const driver = new Error('socket hang up');
    const { backend } = recordingBackend({ get: () => Promise.reject(driver) });
    const ledger = new RuntimeLedger(backend);
    const failure: unknown = await ledger.get('points', 'k').catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(LedgerUnavailableError);
    expect((failure as Error).cause).toBe(driver);
    const thrown = { not: 'an Error' };
    await expect(
      ledger.transaction(request(), () => {
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- a handler may throw anything
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    const rejected = new TypeError('handler bug');
    await expect(ledger.transaction(request(), () => Promise.reject(rejected))).rejects.toBe(rejected);
  });

  it('turns an owner-checked write that found no row of its owner into LeaseLostError', async () => {
    const { backend } = recordingBackend({
      leased: {
        claim: (r) => Promise.resolve(won(r)),
        renew: () => Promise.resolve(undefined),
        complete: () => Promise.resolve(false),
        fail: () => Promise.resolve(false),
        release: () => Promise.resolve(true),
      },
    });
    const ledger = new RuntimeLedger(backend);
    const claim = { group: 'points', key: 'k', owner: 'o', attempt: 3, leaseUntil: new Date(0) };
    await expect(ledger.renew(claim, 1000)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(ledger.complete(claim, null)).rejects.toMatchObject({ name: 'LeaseLostError', attempt: 3 });
    await expect(ledger.fail(claim, 'x')).rejects.toBeInstanceOf(LeaseLostError);
    await expect(ledger.release(claim)).resolves.toBeUndefined();
  });

  it('fits every request to the stored limits before the backend sees it, and refuses a key no ledger can store', async () => {
    const { backend, seen } = recordingBackend();
    const ledger = new RuntimeLedger(backend);
    await ledger.transaction(request({ brokerId: 'b'.repeat(2000), topic: 't\u0000' }), () => null);
    expect(seen.requests[0]?.brokerId).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(seen.requests[0]?.topic).toMatch(/^sha256:[0-9a-f]{64}$/);
    await expect(ledger.transaction(request({ key: 'k'.repeat(256) }), () => null)).rejects.toMatchObject({
      name: 'PermanentError',
      reason: 'invalid-key',
    });
    await ledger.recordFailure(request(), 'e'.repeat(3000));
    expect(seen.requests).toHaveLength(2);
  });

  it('refuses a result it cannot store with PermanentError, inside the work so the claim rolls back', async () => {
    const { backend, seen } = recordingBackend();
    const ledger = new RuntimeLedger(backend);
    await expect(ledger.transaction(request(), () => 'x'.repeat(1_048_577))).rejects.toMatchObject({
      reason: 'unstorable-result',
    });
    await expect(ledger.transaction(request(), () => 'nul\u0000')).rejects.toBeInstanceOf(PermanentError);
    expect(seen.stored).toEqual([]);
  });

  it('logs ready, closed and a failed open through the configured logger', async () => {
    const lines: string[] = [];
    const logger: Logger = {
      debug: () => undefined,
      info: (message) => lines.push(`info ${message}`),
      warn: (message) => lines.push(`warn ${message}`),
      error: () => undefined,
    };
    let attempts = 0;
    const { backend } = recordingBackend({
      open: () => (++attempts === 1 ? Promise.reject(new Error('down')) : Promise.resolve()),
    });
    const ledger = new RuntimeLedger(backend, { logger });
    await ledger.init().catch(() => undefined);
    await ledger.init();
    await ledger.close();
    expect(lines).toEqual([
      'warn oncemq: ledger init failed; the next call tries again',
      'info oncemq: ledger ready',
      'info oncemq: ledger closed',
    ]);
  });
});
