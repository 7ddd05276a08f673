/**
 * The ledger: the durable record of claimed and processed keys, one row per `(group, key)`.
 * The pipeline and the CLI use {@link Ledger}; backends implement the smaller `LedgerBackend`
 * (ledger-backend.ts) and `RuntimeLedger` (runtime-ledger.ts) wraps each once. The pipeline branches on
 * {@link LedgerCapabilities}, never on names.
 */
import type { SqlDialect } from './sql-dialect.js';

export { MAX_REMARK_LENGTH } from './claim-request.js';

/**
 * A ledger row's state. `PROCESSING`: a leased claim is held (or its owner died and the lease will
 * run out). `SUCCESS`: the effect was applied; every later copy is a duplicate. `FAIL`: the last
 * execution failed; the next delivery reclaims the key.
 */
export type LedgerStatus = 'PROCESSING' | 'SUCCESS' | 'FAIL';

/** One ledger row as stored. */
export interface LedgerRecord {
  /** The consumer group of the row. */
  readonly group: string;
  /** The normalized business key. */
  readonly key: string;
  /** Where the key stands: being processed, applied, or failed. */
  readonly status: LedgerStatus;
  /** The payload fingerprint recorded with the key; `null` when the pipeline computes none. */
  readonly fingerprint: string | null;
  /** Token of the process that holds (or last held) the claim. */
  readonly owner: string | null;
  /** Executions started for this key: 1 on the first claim, +1 on each reclaim. */
  readonly attempt: number;
  /** End of the current lease (PROCESSING rows); `null` once finished. */
  readonly leaseUntil: Date | null;
  /** Broker id of the copy that created the row; tells redelivery from republish. */
  readonly brokerId: string | null;
  /** Topic of the copy that created the row. */
  readonly topic: string | null;
  /** Error text of the last failure. */
  readonly remark: string | null;
  /** Serialized result stored at completion, replayed to duplicates. */
  readonly result: string | null;
  /** When the key was first claimed. */
  readonly createdAt: Date;
  /** When the row last changed (claim, renewal, completion, failure); retention purges by it. */
  readonly updatedAt: Date;
}

/** What a claim records about the delivery that makes it. */
export interface ClaimRequest {
  /** The consumer group claiming the key. */
  readonly group: string;
  /** The normalized business key. */
  readonly key: string;
  /** The delivery's payload fingerprint, compared with the recorded one (a mismatch is a conflict). */
  readonly fingerprint: string | null;
  /** The broker id of the copy claiming; recorded, and compared to tell redelivery from republish. */
  readonly brokerId: string;
  /** The topic of the copy claiming. */
  readonly topic: string;
  /** Length of the lease a leased claim takes. */
  readonly leaseMs: number;
}

/** A claim held by this process: the owner token and attempt every later write is checked against. */
export interface Claim {
  /** The consumer group of the claimed key. */
  readonly group: string;
  /** The claimed business key. */
  readonly key: string;
  /** This claim's owner token, random per claim: a renewal or completion by anyone else is refused. */
  readonly owner: string;
  /** The execution number of this claim: 1 for the first, +1 for each reclaim. */
  readonly attempt: number;
  /** When the lease ends unless renewed: the claim's time plus the request's `leaseMs`. */
  readonly leaseUntil: Date;
}

/**
 * Answer of an atomic claim: `acquired` or `reclaimed` (this delivery won the key and may run the
 * handler, with `claim`), or `duplicate`, `busy`, `conflict` (another copy's row, as `record`).
 */
export type ClaimResult =
  | {
      /** A first claim of the key: this delivery runs the handler. */
      readonly status: 'acquired';
      /** The won claim. */
      readonly claim: Claim;
    }
  | {
      /** Took over an expired lease or a failed attempt: this delivery runs the handler. */
      readonly status: 'reclaimed';
      /** The won claim, its attempt one more than the previous row's. */
      readonly claim: Claim;
      /** The row as it was before the takeover. */
      readonly previous: LedgerRecord;
    }
  | {
      /** The key is SUCCESS: the effect was applied by a copy before. */
      readonly status: 'duplicate';
      /** The SUCCESS row, with its broker id and stored result. */
      readonly record: LedgerRecord;
    }
  | {
      /** Another copy holds a live lease on the key. */
      readonly status: 'busy';
      /** The PROCESSING row, with its lease end. */
      readonly record: LedgerRecord;
    }
  | {
      /** The key is recorded with another fingerprint. */
      readonly status: 'conflict';
      /** The row with the other fingerprint. */
      readonly record: LedgerRecord;
    };

/** The `status` of a {@link ClaimResult}: `acquired`, `reclaimed`, `duplicate`, `busy` or `conflict`. */
export type ClaimStatus = ClaimResult['status'];

/** A claim this delivery won: its handler may run. */
export type WonClaim = Extract<ClaimResult, { status: 'acquired' | 'reclaimed' }>;

/** Whether the claim was won (a first claim, or a takeover of an expired lease or failed attempt). */
export function isWon(result: ClaimResult): result is WonClaim {
  return result.status === 'acquired' || result.status === 'reclaimed';
}

/**
 * Work done inside a transactional claim. Receives the backend's transaction handle; returns the
 * serialized result to store with the row (`null` for none).
 */
export type TransactionWork<Tx> = (tx: Tx, claim: Claim) => string | null | Promise<string | null>;

/**
 * What a ledger can do. Each optional feature is declared once, by the backend implementing it (see
 * `LedgerBackend`); the runtime derives these flags from that, so a flag and its methods never disagree.
 * A method whose feature is missing is still there and throws a ConfigError saying so.
 */
export interface LedgerCapabilities {
  /** Claim, the handler's writes and completion can share one local transaction ({@link Ledger.transaction}, {@link Ledger.recordFailure}). */
  readonly transactional: boolean;
  /** Leased claims with owner-checked renew, complete, fail and release. */
  readonly leased: boolean;
  /** Stores a handler's result and replays it to duplicates. */
  readonly storesResult: boolean;
  /** Claims made through separate connections race for real (false for one in-memory connection). */
  readonly concurrentConnections: boolean;
  /** Deletes finished rows past a cut-off ({@link Ledger.purge}). */
  readonly purge: boolean;
  /** Claims a batch of keys in one statement inside one transaction ({@link Ledger.transactionMany}). */
  readonly batchClaim: boolean;
  /** Lists rows by status and lease ({@link Ledger.list}) and resets them on purpose ({@link Ledger.reset}). */
  readonly inspect: boolean;
  /** A ledger-wide lock so that one instance at a time runs retention ({@link Ledger.tryMaintenanceLock}). */
  readonly maintenanceLock: boolean;
}

/** The capabilities of a ledger with leased claims and purge, and nothing else (a start for hand-written test ledgers). */
export const DEFAULT_LEDGER_CAPABILITIES: LedgerCapabilities = Object.freeze({
  transactional: false,
  leased: true,
  storesResult: true,
  concurrentConnections: true,
  purge: true,
  batchClaim: false,
  inspect: false,
  maintenanceLock: false,
});

/** Input of {@link Ledger.purge}. */
export interface PurgeOptions {
  /** Finished rows (SUCCESS, FAIL) last updated before this instant are deleted. */
  readonly olderThan: Date;
  /**
   * Rows per batch, deleted by one statement in its own short transaction (the MySQL ledger reads a
   * batch's keys with one statement and deletes them in key order, at most 1,000 rows a statement).
   * @default 1000
   */
  readonly batchSize?: number;
  /** Stop after this many batches (the rest waits for the next run). @default unlimited */
  readonly maxBatches?: number;
}

/** What one {@link Ledger.purge} call did. */
export interface PurgeResult {
  /** Rows deleted. */
  readonly deleted: number;
  /** Statements (short transactions) it took; `maxBatches` bounds it. */
  readonly batches: number;
}

/** Input of {@link Ledger.list}; all filters combine. */
export interface ListQuery {
  /** Only rows of this consumer group. @default every group */
  readonly group?: string;
  /** Only rows in this status. @default every status */
  readonly status?: LedgerStatus;
  /** Only PROCESSING rows whose lease ended before this instant: stuck claims of dead owners. */
  readonly leaseExpiredBefore?: Date;
  /** Most rows returned. @default 100 */
  readonly limit?: number;
}

/** A held ledger-wide lock for maintenance (retention runs); see {@link Ledger.tryMaintenanceLock}. */
export interface MaintenanceLock {
  /** Lets the lock go, so that another instance's next retention run may take it. */
  release(): Promise<void>;
}

/** One claim decided by {@link Ledger.transactionMany}, in request order. */
export type BatchWork<Tx> = (
  tx: Tx,
  won: readonly { readonly index: number; readonly claim: Claim }[],
) => readonly (string | null)[] | Promise<readonly (string | null)[]>;

/** Options of {@link Ledger.reset}. */
export interface ResetOptions {
  /** Deletes a SUCCESS row too (its effect would be applied again). */
  readonly force?: boolean;
}

/**
 * A ledger as the pipeline and the CLI use it: every method is present, and one whose capability is
 * missing throws a ConfigError. Built-in ledgers (`new PostgresLedger({ pool })`…) and custom ones
 * (`new RuntimeLedger(backend)`) all come out of the same runtime wrapper: it initializes once,
 * refuses use after close() with ClosedError, fits requests to the stored limits, checks owners and
 * wraps stray driver errors.
 */
export interface Ledger<Tx = unknown> {
  /** Backend name, for logs and metrics. */
  readonly name: string;
  /** What this ledger can do; the pipeline picks its mode and batch path from these. */
  readonly capabilities: LedgerCapabilities;
  /** How long finished rows are kept; checked against the redelivery horizon at start-up. */
  readonly retentionMs: number;
  /**
   * How statements run in the handler's transaction `Tx`, for helpers such as `transition()`;
   * `undefined` for a ledger without SQL (Redis).
   */
  readonly dialect: SqlDialect<Tx> | undefined;

  /**
   * Prepares the store: runs migrations, or only checks the table when the ledger was configured
   * with `migrate: false`. Idempotent and cheap once done; concurrent calls share one run, a failed
   * one is run again by the next call. Every other method calls it first.
   */
  init(): Promise<void>;

  /**
   * Claims `request` and, only if the claim is won, runs `work` in the same local transaction and
   * records the row as SUCCESS with work's result. If work throws, everything rolls back and the
   * error propagates. Requires `capabilities.transactional`.
   */
  transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult>;

  /**
   * Records a failed transactional execution after its rollback: the row becomes FAIL with `remark`
   * and attempt + 1, unless the key was completed meanwhile. Requires `capabilities.transactional`.
   */
  recordFailure(request: ClaimRequest, remark: string): Promise<void>;

  /** Commits a PROCESSING row with a fresh owner token and lease (leased mode). */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /** Extends the lease; throws LeaseLostError unless `claim` still owns the row. */
  renew(claim: Claim, leaseMs: number): Promise<Claim>;
  /** Marks SUCCESS with an optional serialized result; throws LeaseLostError for a stale owner. */
  complete(claim: Claim, result: string | null): Promise<void>;
  /** Marks FAIL with a remark (reclaimable by the next delivery); owner-checked. */
  fail(claim: Claim, remark: string): Promise<void>;
  /** Deletes the PROCESSING row so the next delivery claims afresh; owner-checked. */
  release(claim: Claim): Promise<void>;

  /**
   * Claims all `requests` in one statement inside one transaction and runs `work` once for the won
   * ones; work returns one serialized result per won claim, in order. If work throws, the whole
   * batch rolls back. Requires `capabilities.batchClaim`.
   */
  transactionMany(requests: readonly ClaimRequest[], work: BatchWork<Tx>): Promise<readonly ClaimResult[]>;

  /** The row of `(group, key)`, or `undefined` when the ledger has none (never claimed, or purged). */
  get(group: string, key: string): Promise<LedgerRecord | undefined>;
  /** Rows matching `query`, oldest update first. Requires `capabilities.inspect`. */
  list(query: ListQuery): Promise<readonly LedgerRecord[]>;
  /**
   * Deletes the row of a stuck (PROCESSING) or failed (FAIL) claim so the next delivery claims afresh.
   * A SUCCESS row is only deleted with `force` (its effect would be applied again). Returns whether a
   * row was deleted. Requires `capabilities.inspect`.
   */
  reset(group: string, key: string, options?: ResetOptions): Promise<boolean>;
  /**
   * Takes the ledger-wide maintenance lock when free, so that one instance at a time runs retention;
   * `undefined` when another instance holds it. Requires `capabilities.maintenanceLock`.
   */
  tryMaintenanceLock(): Promise<MaintenanceLock | undefined>;
  /** Deletes finished rows older than the cut-off, in bounded batches. Requires `capabilities.purge`. */
  purge(options: PurgeOptions): Promise<PurgeResult>;
  /** Lets go of what the ledger opened (never the caller's pool or client); every later call is refused with ClosedError. */
  close(): Promise<void>;
}
