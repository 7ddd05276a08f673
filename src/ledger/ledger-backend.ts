import type {
  BatchWork,
  Claim,
  ClaimRequest,
  ClaimResult,
  LedgerCapabilities,
  LedgerRecord,
  ListQuery,
  MaintenanceLock,
  PurgeOptions,
  PurgeResult,
  ResetOptions,
  TransactionWork,
} from './ledger.js';
import type { SqlDialect } from './sql-dialect.js';

/*
 * The plug-in point of a ledger: what a backend implements, and nothing the runtime does for it.
 * `RuntimeLedger` wraps a backend once: it opens it once (again after a failure), refuses use after
 * close, fits every request to the stored limits, checks results, turns an owner check that found
 * no row into LeaseLostError, wraps stray driver errors and logs. Each optional feature is one
 * property, named as its capability: present, the feature is there; absent, the capability is false
 * and the ledger's methods for it refuse. A feature of several methods is an object, a feature of
 * one is that method (so a class backend declares it by having the method).
 */

/** Claims that share the handler's local transaction. Capability `transactional`. */
export interface TransactionalClaims<Tx> {
  /**
   * Claims `request` and, if won, runs `work` in the same transaction and commits the row as
   * SUCCESS with work's result; anything else rolls back. Errors of `work` pass unchanged.
   */
  transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult>;
  /** Records a failed execution after its rollback: a FAIL row, attempt + 1, unless it succeeded meanwhile. */
  recordFailure(request: ClaimRequest, remark: string): Promise<void>;
}

/**
 * Claims committed on their own with an owner token and a lease. Capability `leased`. Every write
 * after the claim names the owner and attempt it expects, and answers whether the row still had them.
 */
export interface LeasedClaims {
  /**
   * Claims `request` atomically and commits at once: a PROCESSING row with a fresh owner token and a
   * lease of `request.leaseMs`, or the answer for the row already there (see `decideExisting`).
   */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /** The new end of the lease, or `undefined` when `claim` no longer owns the row. */
  renew(claim: Claim, leaseMs: number): Promise<Date | undefined>;
  /** Marks the owned row SUCCESS with `result`; false when `claim` no longer owns it. */
  complete(claim: Claim, result: string | null): Promise<boolean>;
  /** Marks the owned row FAIL with `remark`; false when `claim` no longer owns it. */
  fail(claim: Claim, remark: string): Promise<boolean>;
  /** Deletes the owned row; false when `claim` no longer owns it. */
  release(claim: Claim): Promise<boolean>;
}

/**
 * A batch claimed in one transaction (capability `batchClaim`, which needs `transactional`): claims
 * every request, runs `work` once for the won ones (the runtime checks its result array) and
 * commits once; answers one result per request, in order.
 */
export type BatchClaim<Tx> = (
  requests: readonly ClaimRequest[],
  work: BatchWork<Tx>,
) => Promise<readonly ClaimResult[]>;

/** Rows read and reset on purpose (the CLI's `oncemq ledger`). Capability `inspect`. */
export interface LedgerInspection {
  /** Rows matching every filter of `query`, oldest update first, at most `query.limit` (default 100). */
  list(query: ListQuery): Promise<readonly LedgerRecord[]>;
  /**
   * Deletes the row of `(group, key)` when it is PROCESSING or FAIL, or SUCCESS with `options.force`;
   * answers whether a row was deleted.
   */
  reset(group: string, key: string, options: ResetOptions): Promise<boolean>;
}

/** Takes a ledger-wide lock for retention when free (capability `maintenanceLock`); `undefined` when taken. */
export type MaintenanceLockTaker = () => Promise<MaintenanceLock | undefined>;

/**
 * Deletes finished rows in bounded batches (capability `purge`); `options` come with their defaults
 * filled in and checked by the runtime.
 */
export type Purge = (options: Required<PurgeOptions>) => Promise<PurgeResult>;

/** Facts about a store that no method declares. */
export interface LedgerTraits {
  /** Stores a handler's result and replays it to duplicates. @default true */
  readonly storesResult?: boolean;
  /** Claims through separate connections race for real (false for one in-memory connection). @default true */
  readonly concurrentConnections?: boolean;
}

export const DEFAULT_LEDGER_TRAITS = Object.freeze({ storesResult: true, concurrentConnections: true });

/** What a ledger backend implements. Wrap it with `new RuntimeLedger(backend)` (or extend `RuntimeLedger`). */
export interface LedgerBackend<Tx = unknown> {
  /** Backend name, for logs and metrics. */
  readonly name: string;
  /** How long finished rows are kept. */
  readonly retentionMs: number;
  /** Facts about the store that no method declares. @default { storesResult: true, concurrentConnections: true } */
  readonly traits?: LedgerTraits;
  /** How statements run in the handler's transaction; SQL backends only. */
  readonly dialect?: SqlDialect<Tx> | undefined;

  /** Connects and prepares the store. Called once before any other method; called again after it failed. */
  open(): Promise<void>;
  /** Lets go of what the backend opened. Called once, after open() settled, whether or not it ran. */
  close(): Promise<void>;
  /** The row of `(group, key)`, or `undefined` when there is none. */
  get(group: string, key: string): Promise<LedgerRecord | undefined>;

  /** Claims sharing the handler's transaction; present means capability `transactional`. @default none */
  readonly transactional?: TransactionalClaims<Tx> | undefined;
  /** Owner-checked leased claims; present means capability `leased`. @default none */
  readonly leased?: LeasedClaims | undefined;
  /** A batch claimed in one transaction; present means capability `batchClaim` (needs `transactional`). @default none */
  readonly batchClaim?: BatchClaim<Tx> | undefined;
  /** Listing and resetting rows; present means capability `inspect`. @default none */
  readonly inspect?: LedgerInspection | undefined;
  /** The ledger-wide lock for retention; present means capability `maintenanceLock`. @default none */
  readonly maintenanceLock?: MaintenanceLockTaker | undefined;
  /** Deleting finished rows; present means capability `purge`. @default none */
  readonly purge?: Purge | undefined;
}

/** The capabilities a backend declares: each feature from its one property, the rest from its traits. */
export function capabilitiesOf<Tx>(backend: LedgerBackend<Tx>): LedgerCapabilities {
  const traits = { ...DEFAULT_LEDGER_TRAITS, ...backend.traits };
  return Object.freeze({
    transactional: backend.transactional !== undefined,
    leased: backend.leased !== undefined,
    storesResult: traits.storesResult,
    concurrentConnections: traits.concurrentConnections,
    purge: backend.purge !== undefined,
    batchClaim: backend.batchClaim !== undefined,
    inspect: backend.inspect !== undefined,
    maintenanceLock: backend.maintenanceLock !== undefined,
  });
}
