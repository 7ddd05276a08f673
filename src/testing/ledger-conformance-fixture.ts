import {
  isWon,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type Ledger,
  type LedgerCapabilities,
} from '../ledger/ledger.js';

/** Options for one ledger instance of a conformance namespace. */
export interface LedgerInstanceOptions {
  /** Clock in epoch milliseconds the instance uses for leases and timestamps. */
  readonly clock?: () => number;
}

/**
 * One fresh, isolated namespace (schema, database file, table) for one test. Every instance it
 * opens shares the namespace, each on its own connection, so claims made through them race for real.
 */
export interface LedgerNamespace<Tx> {
  /** A new, initialized ledger instance on its own connection to this namespace. */
  open(options?: LedgerInstanceOptions): Promise<Ledger<Tx>>;
  /**
   * Optional business effect for transactional cases: `apply` writes one effect for `key` through
   * the claim's transaction handle, `count` reads how many effects `key` has (committed ones only).
   */
  readonly effect?: {
    /** Writes one effect for `key` through the claim's transaction `tx`. */
    apply(tx: Tx, key: string): void | Promise<void>;
    /** How many committed effects `key` has. */
    count(key: string): Promise<number>;
  };
  /** Closes every instance opened and removes the namespace. */
  teardown(): Promise<void>;
}

/** What a ledger spec hands to {@link describeLedgerConformance}. */
export interface LedgerConformanceFactory<Tx> {
  /**
   * The capabilities of the ledgers this factory opens, known before any test runs (cases are
   * declared, and skipped, from them). A case checks that opened instances declare the same.
   */
  readonly capabilities: LedgerCapabilities;
  /** Makes a fresh isolated namespace. */
  create(): Promise<LedgerNamespace<Tx>>;
  /**
   * Constructs (without initializing) a ledger whose table is named `table`; must throw a
   * ConfigError synchronously for a name that is not a safe SQL identifier. Omitted by ledgers
   * without a SQL table (Redis): the table-name case is then skipped.
   */
  construct?(table: string): unknown;
  /**
   * Whether a claim on a second connection waits for another connection's in-flight transaction
   * without blocking the process. `false` for synchronous drivers (better-sqlite3 blocks the event
   * loop on the write lock, so an in-flight transaction awaiting in the same process is never
   * finished). @default true
   */
  readonly waitsForInflightTransactions?: boolean;
  /** Parallel connections used by the race cases. @default 8 */
  readonly raceConnections?: number;
}

let sequence = 0;

/** A claim request with a key unique to the test run. */
export function conformanceRequest(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  sequence++;
  return {
    group: 'conformance',
    key: `key-${process.pid}-${sequence}`,
    fingerprint: 'fp-1',
    brokerId: `broker-${sequence}`,
    topic: 'payments',
    leaseMs: 30_000,
    ...overrides,
  };
}

/** The claim of a won result; fails the test otherwise. */
export function wonClaim(result: ClaimResult): Claim {
  if (!isWon(result)) {
    throw new Error(`expected the claim to be won, got '${result.status}'`);
  }
  return result.claim;
}

/** A promise with its resolver, to hold a transaction open. */
export function gate(): {
  /** Resolves once `open` is called. */
  promise: Promise<void>;
  /** Resolves `promise`. */
  open: () => void;
} {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** Runs `body` with a fresh namespace and tears it down afterwards. */
export async function withNamespace<Tx>(
  factory: LedgerConformanceFactory<Tx>,
  body: (namespace: LedgerNamespace<Tx>) => Promise<void>,
): Promise<void> {
  const namespace = await factory.create();
  try {
    await body(namespace);
  } finally {
    await namespace.teardown();
  }
}

/**
 * Applies the namespace's effect for each key and answers `value`, staying synchronous when the effect
 * is (a transaction of a synchronous driver must not wait on the event loop while other connections race).
 * Asynchronous effects run one after another: a transaction's connection runs one statement at a time.
 */
export function applyThen<Tx, T>(
  namespace: LedgerNamespace<Tx>,
  tx: Tx,
  keys: readonly string[],
  value: T,
): T | Promise<T> {
  for (const [index, key] of keys.entries()) {
    const applied = namespace.effect?.apply(tx, key);
    if (applied instanceof Promise) {
      return (async () => {
        await applied;
        for (const rest of keys.slice(index + 1)) await namespace.effect?.apply(tx, rest);
        return value;
      })();
    }
  }
  return value;
}

/** A clock a lease case moves by hand, in epoch milliseconds. */
export class ManualClock {
  constructor(public now = 1_700_000_000_000) {}

  /** The clock function a ledger instance is opened with. */
  readonly read = (): number => this.now;

  advance(ms: number): void {
    this.now += ms;
  }
}

/** What a case on one ledger instance works with. */
export interface LedgerCase<Tx> {
  readonly ns: LedgerNamespace<Tx>;
  /** An instance opened on the case's fresh namespace. */
  readonly ledger: Ledger<Tx>;
  /** A request for a key no other case uses. */
  readonly request: ClaimRequest;
}

/** What a case on two instances of one namespace works with, each on its own connection. */
export interface TwoLedgersCase<Tx> {
  readonly ns: LedgerNamespace<Tx>;
  readonly a: Ledger<Tx>;
  readonly b: Ledger<Tx>;
  /** A request for a key no other case uses. */
  readonly request: ClaimRequest;
}

/** What a case on several instances of one namespace works with, each on its own connection. */
export interface LedgersCase<Tx> {
  readonly ns: LedgerNamespace<Tx>;
  readonly ledgers: readonly Ledger<Tx>[];
  /** A request for a key no other case uses. */
  readonly request: ClaimRequest;
}

/**
 * The bodies of conformance cases, each run on a fresh namespace that is torn down afterwards, so
 * that a case states only the behaviour it checks.
 */
export function ledgerCases<Tx>(factory: LedgerConformanceFactory<Tx>) {
  return {
    /** One instance on the ledger's own clock. */
    oneLedger: (body: (c: LedgerCase<Tx>) => void | Promise<void>) => (): Promise<void> =>
      withNamespace(factory, async (ns) =>
        body({ ns, ledger: await ns.open(), request: conformanceRequest() }),
      ),

    /** One instance on a clock the case moves by hand. */
    oneLedgerOnClock:
      (body: (c: LedgerCase<Tx> & { readonly clock: ManualClock }) => Promise<void>) => (): Promise<void> =>
        withNamespace(factory, async (ns) => {
          const clock = new ManualClock();
          const ledger = await ns.open({ clock: clock.read });
          await body({ ns, ledger, clock, request: conformanceRequest() });
        }),

    /** Two instances, opened one after the other. */
    twoLedgers: (body: (c: TwoLedgersCase<Tx>) => Promise<void>) => (): Promise<void> =>
      withNamespace(factory, async (ns) => {
        const [a, b] = [await ns.open(), await ns.open()];
        await body({ ns, a, b, request: conformanceRequest() });
      }),

    /** `count` instances, opened together. */
    ledgers: (count: number, body: (c: LedgersCase<Tx>) => Promise<void>) => (): Promise<void> =>
      withNamespace(factory, async (ns) => {
        const ledgers = await Promise.all(Array.from({ length: count }, () => ns.open()));
        await body({ ns, ledgers, request: conformanceRequest() });
      }),
  };
}
