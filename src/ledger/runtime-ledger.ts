import { ClosedError, ConfigError, errorText, LeaseLostError } from '../core/errors.js';
import { toLogger, type Logger, type LoggerLike } from '../core/logger.js';
import { checkResult, fitClaimRequest, fitRemark } from './claim-request.js';
import { ledgerFailure } from './ledger-errors.js';
import { capabilitiesOf, type LeasedClaims, type LedgerBackend } from './ledger-backend.js';
import { checkedBatchWork, checkedWork, WorkFailures } from './ledger-work.js';
import type {
  BatchWork,
  Claim,
  ClaimRequest,
  ClaimResult,
  Ledger,
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

/** Options of `new RuntimeLedger(backend, options)`, and of every built-in ledger's runtime. */
export interface RuntimeLedgerOptions {
  /**
   * Where the ledger reports that it is ready or closed, and the failures it recovers from.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Rows deleted per statement by purge() when the options name no batch size. */
export const DEFAULT_PURGE_BATCH_SIZE = 1000;

type Feature = 'transactional' | 'leased' | 'batchClaim' | 'inspect' | 'maintenanceLock' | 'purge';

/** What a call of a missing feature says: the configuration field at fault and the fix. */
const MISSING: Readonly<Record<Feature, readonly [field: string, message: string]>> = {
  transactional: ['mode', "cannot share a transaction with the handler; use mode 'leased'"],
  leased: ['mode', "has no leased claims; use mode 'transactional'"],
  batchClaim: ['ledger', 'claims no batch in one transaction; claim one request at a time'],
  inspect: ['ledger', 'cannot list or reset rows'],
  maintenanceLock: ['ledger', 'has no maintenance lock'],
  purge: ['ledger', 'purges nothing: its finished rows expire on their own'],
};

const READY = Promise.resolve();

/** A driver failure as the caller sees it: oncemq's own errors pass, anything else is wrapped with its cause. */
function runtimeFailure(error: unknown, name: string, what: string): Error {
  const message = error instanceof Error ? error.message : String(error);
  return ledgerFailure(error, `${name} ledger failed ${what}: ${message}`);
}

/** Purge options with their defaults, checked once for every backend. */
export function purgeOptions(options: PurgeOptions): Required<PurgeOptions> {
  const batchSize = options.batchSize ?? DEFAULT_PURGE_BATCH_SIZE;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new ConfigError('batchSize', `must be a positive integer, got ${String(batchSize)}`);
  }
  const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
  if (!(maxBatches >= 1)) throw new ConfigError('maxBatches', 'must be at least 1');
  if (!(options.olderThan instanceof Date) || Number.isNaN(options.olderThan.getTime())) {
    throw new ConfigError('olderThan', 'must be a valid Date');
  }
  return { olderThan: options.olderThan, batchSize, maxBatches };
}

/**
 * The one wrapper around every ledger backend, as Kysely's RuntimeDriver wraps every driver:
 * - opens the backend once: concurrent callers share one open, a failed open is run again by the
 *   next call, and every method opens first, so `init()` is optional and cheap once done;
 * - refuses every use after `close()` with ClosedError, and closes the backend once;
 * - fits every claim request to the stored limits (fitClaimRequest), cuts remarks, checks results;
 * - turns an owner check that found no row into LeaseLostError;
 * - wraps a driver error that escaped the backend in LedgerUnavailableError (the work's own errors
 *   pass unchanged); logs through the configured logger.
 * Built-in ledgers extend it (`new PostgresLedger({ pool })`); a custom backend gets the same with
 * `new RuntimeLedger(backend)`.
 */
export class RuntimeLedger<Tx = unknown> implements Ledger<Tx> {
  readonly name: string;
  readonly capabilities: LedgerCapabilities;
  readonly retentionMs: number;
  readonly dialect: SqlDialect<Tx> | undefined;

  readonly #backend: LedgerBackend<Tx>;
  readonly #logger: Logger;
  #ready = false;
  #opening: Promise<void> | undefined;
  #closing: Promise<void> | undefined;

  constructor(backend: LedgerBackend<Tx>, options: RuntimeLedgerOptions = {}) {
    if (backend.batchClaim !== undefined && backend.transactional === undefined) {
      throw new ConfigError(
        'batchClaim',
        `the ${backend.name} ledger has batch claims without transactional claims`,
      );
    }
    this.#backend = backend;
    this.#logger = toLogger(options.logger);
    this.name = backend.name;
    this.retentionMs = backend.retentionMs;
    this.dialect = backend.dialect;
    this.capabilities = capabilitiesOf(backend);
  }

  init(): Promise<void> {
    if (this.#closing !== undefined) return Promise.reject(this.#closed());
    if (this.#ready) return READY;
    this.#opening ??= this.#open();
    return this.#opening;
  }

  async #open(): Promise<void> {
    try {
      await this.#backend.open();
    } catch (error) {
      this.#opening = undefined;
      const failure = runtimeFailure(error, this.name, 'opening');
      this.#logger.warn('oncemq: ledger init failed; the next call tries again', {
        ledger: this.name,
        error: errorText(failure),
      });
      throw failure;
    }
    this.#ready = true;
    this.#logger.info('oncemq: ledger ready', { ledger: this.name });
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    await this.#opening?.catch(() => undefined);
    try {
      await this.#backend.close();
    } catch (error) {
      const failure = runtimeFailure(error, this.name, 'closing');
      this.#logger.warn('oncemq: ledger close failed', { ledger: this.name, error: errorText(failure) });
      throw failure;
    }
    this.#logger.info('oncemq: ledger closed', { ledger: this.name });
  }

  #closed(): ClosedError {
    return new ClosedError(`ledger '${this.name}'`);
  }

  /**
   * Runs one operation: refused after close, opened first, stray driver errors wrapped (errors the
   * caller's work threw pass as they are).
   */
  #use<T>(what: string, call: () => Promise<T>, work?: WorkFailures): Promise<T>;
  #use<T, R>(
    what: string,
    call: () => Promise<T>,
    work: WorkFailures | undefined,
    then: (value: T) => R,
  ): Promise<R>;
  #use<T, R>(
    what: string,
    call: () => Promise<T>,
    work?: WorkFailures,
    then?: (value: T) => R,
  ): Promise<T | R> {
    if (this.#closing !== undefined) return Promise.reject(this.#closed());
    if (!this.#ready) return this.init().then(() => this.#use(what, call, work, then as (value: T) => R));
    // Once open, no async frame of its own (one per claim and completion): one reaction that both
    // maps the value (`then`, whose own errors are oncemq's and pass as they are) and wraps a failure.
    let pending: Promise<T>;
    try {
      pending = call();
    } catch (error) {
      return this.#thrown(error, what, work);
    }
    return pending.then(then, (error: unknown) => {
      throw this.#failure(error, what, work);
    });
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- a throw that becomes a rejection
  async #thrown(error: unknown, what: string, work: WorkFailures | undefined): Promise<never> {
    throw this.#failure(error, what, work);
  }

  #failure(error: unknown, what: string, work: WorkFailures | undefined): unknown {
    return work?.has(error) === true ? error : runtimeFailure(error, this.name, what);
  }

  /**
   * For a subclass's own operations that must not open the ledger first (`migrate()`): refused
   * after close, stray driver errors wrapped.
   */
  protected async whileOpen<T>(what: string, call: () => Promise<T>): Promise<T> {
    if (this.#closing !== undefined) throw this.#closed();
    try {
      return await call();
    } catch (error) {
      throw runtimeFailure(error, this.name, what);
    }
  }

  #missing(feature: Feature): Promise<never> {
    if (this.#closing !== undefined) return Promise.reject(this.#closed());
    const [field, message] = MISSING[feature];
    return Promise.reject(
      new ConfigError(field, `the ${this.name} ledger ${message} (capabilities.${feature} is false)`),
    );
  }

  transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult> {
    const claims = this.#backend.transactional;
    if (claims === undefined) return this.#missing('transactional');
    const failures = new WorkFailures();
    return this.#use(
      'claiming',
      () => claims.transaction(fitClaimRequest(request), checkedWork(work, failures)),
      failures,
    );
  }

  recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    const claims = this.#backend.transactional;
    if (claims === undefined) return this.#missing('transactional');
    return this.#use('recording a failure', () =>
      claims.recordFailure(fitClaimRequest(request), fitRemark(remark)),
    );
  }

  transactionMany(requests: readonly ClaimRequest[], work: BatchWork<Tx>): Promise<readonly ClaimResult[]> {
    const batchClaim = this.#backend.batchClaim?.bind(this.#backend);
    if (batchClaim === undefined) return this.#missing('batchClaim');
    const failures = new WorkFailures();
    return this.#use(
      'claiming a batch',
      () => batchClaim(requests.map(fitClaimRequest), checkedBatchWork(work, failures)),
      failures,
    );
  }

  claim(request: ClaimRequest): Promise<ClaimResult> {
    const leased = this.#backend.leased;
    if (leased === undefined) return this.#missing('leased');
    return this.#use('claiming', () => leased.claim(fitClaimRequest(request)));
  }

  renew(claim: Claim, leaseMs: number): Promise<Claim> {
    const leased = this.#backend.leased;
    if (leased === undefined) return this.#missing('leased');
    return this.#use('renewing a lease', async () => {
      const leaseUntil = await leased.renew(claim, leaseMs);
      if (leaseUntil === undefined) throw new LeaseLostError(claim.group, claim.key, claim.attempt);
      return { ...claim, leaseUntil };
    });
  }

  complete(claim: Claim, result: string | null): Promise<void> {
    return this.#ownedStep('completing', claim, (leased) => leased.complete(claim, checkResult(result)));
  }

  fail(claim: Claim, remark: string): Promise<void> {
    return this.#ownedStep('marking a failure', claim, (leased) => leased.fail(claim, fitRemark(remark)));
  }

  release(claim: Claim): Promise<void> {
    return this.#ownedStep('releasing', claim, (leased) => leased.release(claim));
  }

  /** A step of a held claim that the backend answers with whether the owner's row was written; refused: lease lost. */
  #ownedStep(what: string, claim: Claim, step: (leased: LeasedClaims) => Promise<boolean>): Promise<void> {
    const leased = this.#backend.leased;
    if (leased === undefined) return this.#missing('leased');
    return this.#use(
      what,
      () => step(leased),
      undefined,
      (written) => owned(written, claim),
    );
  }

  get(group: string, key: string): Promise<LedgerRecord | undefined> {
    return this.#use('reading', () => this.#backend.get(group, key));
  }

  list(query: ListQuery): Promise<readonly LedgerRecord[]> {
    const inspect = this.#backend.inspect;
    if (inspect === undefined) return this.#missing('inspect');
    return this.#use('listing', () => inspect.list(query));
  }

  reset(group: string, key: string, options: ResetOptions = {}): Promise<boolean> {
    const inspect = this.#backend.inspect;
    if (inspect === undefined) return this.#missing('inspect');
    return this.#use('resetting', () => inspect.reset(group, key, options));
  }

  tryMaintenanceLock(): Promise<MaintenanceLock | undefined> {
    const take = this.#backend.maintenanceLock?.bind(this.#backend);
    if (take === undefined) return this.#missing('maintenanceLock');
    return this.#use('taking the maintenance lock', take);
  }

  purge(options: PurgeOptions): Promise<PurgeResult> {
    const purge = this.#backend.purge?.bind(this.#backend);
    if (purge === undefined) return this.#missing('purge');
    return this.#use('purging', () => purge(purgeOptions(options)));
  }
}

/** An owner-checked write that found no row of its owner: the lease is lost. */
function owned(written: boolean, claim: Claim): void {
  if (!written) throw new LeaseLostError(claim.group, claim.key, claim.attempt);
}
