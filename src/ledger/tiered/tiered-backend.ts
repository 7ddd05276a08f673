import { LeaseLostError } from '../../core/errors.js';
import {
  isWon,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type Ledger,
  type LedgerRecord,
  type TransactionWork,
  type WonClaim,
} from '../ledger.js';
import type { LedgerBackend, LeasedClaims, TransactionalClaims } from '../ledger-backend.js';
import type { TieredCache } from './tiered-cache.js';

/** An owner-checked write of the SQL ledger as a backend answers it: `lost` when the lease was lost. */
async function unlessLost<T, L>(write: Promise<T>, lost: L): Promise<T | L> {
  try {
    return await write;
  } catch (error) {
    if (error instanceof LeaseLostError) return lost;
    throw error;
  }
}

/**
 * The tiered ledger's backend: the SQL ledger decides every claim the Redis cache cannot answer,
 * and a completed key reaches Redis only after its SQL commit. Every feature but batch claims and
 * inspection is the SQL ledger's (resetting a row would leave its copy in the cache).
 */
export class TieredBackend<Tx> implements LedgerBackend<Tx>, TransactionalClaims<Tx> {
  readonly name: string;
  readonly retentionMs: number;
  readonly traits: { readonly storesResult: boolean; readonly concurrentConnections: boolean };
  readonly dialect: Ledger<Tx>['dialect'];
  readonly transactional = this;
  readonly leased: LeasedClaims | undefined;
  readonly maintenanceLock: (() => ReturnType<Ledger['tryMaintenanceLock']>) | undefined;
  readonly purge: Ledger['purge'] | undefined;

  readonly #sql: Ledger<Tx>;
  readonly #cache: TieredCache;

  constructor(sql: Ledger<Tx>, cache: TieredCache) {
    this.#sql = sql;
    this.#cache = cache;
    const caps = sql.capabilities;
    this.name = `tiered(${sql.name})`;
    this.retentionMs = sql.retentionMs;
    this.traits = { storesResult: caps.storesResult, concurrentConnections: caps.concurrentConnections };
    this.dialect = sql.dialect;
    this.leased = caps.leased
      ? {
          claim: (request) => this.#claim(request),
          renew: (claim, leaseMs) =>
            unlessLost(
              sql.renew(claim, leaseMs).then((c) => c.leaseUntil),
              undefined,
            ),
          complete: (claim, result) =>
            unlessLost(
              sql.complete(claim, result).then(() => true),
              false,
            ),
          fail: (claim, remark) =>
            unlessLost(
              sql.fail(claim, remark).then(() => true),
              false,
            ),
          release: (claim: Claim) =>
            unlessLost(
              sql.release(claim).then(() => true),
              false,
            ),
        }
      : undefined;
    this.maintenanceLock = caps.maintenanceLock ? () => sql.tryMaintenanceLock() : undefined;
    this.purge = caps.purge ? (options) => sql.purge(options) : undefined;
  }

  open(): Promise<void> {
    return this.#sql.init();
  }

  /** Closes the SQL ledger; the Redis client stays open (it is the caller's). */
  close(): Promise<void> {
    return this.#sql.close();
  }

  async transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult> {
    const cached = await this.#cache.answer(request);
    if (cached !== undefined) return cached;
    let stored: string | null = null;
    const result = await this.#sql.transaction(request, async (tx, claim) => {
      stored = await work(tx, claim);
      return stored;
    });
    // The SQL transaction has committed (or answered without claiming) before Redis is written.
    if (isWon(result)) await this.#cache.remember(completed(request, result, stored));
    else if (result.status === 'duplicate') await this.#cache.remember(result.record);
    return result;
  }

  recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    return this.#sql.recordFailure(request, remark);
  }

  /** Leased mode: Redis answers completed keys; the claim itself is the SQL ledger's. */
  async #claim(request: ClaimRequest): Promise<ClaimResult> {
    const cached = await this.#cache.answer(request);
    if (cached !== undefined) return cached;
    const result = await this.#sql.claim(request);
    if (result.status === 'duplicate') await this.#cache.remember(result.record);
    return result;
  }

  /** The SQL ledger's row: the truth. */
  get(group: string, key: string): Promise<LedgerRecord | undefined> {
    return this.#sql.get(group, key);
  }
}

/** The row a won transactional claim committed, as the cache stores it. */
function completed(request: ClaimRequest, result: WonClaim, stored: string | null): LedgerRecord {
  const now = new Date();
  const previous = result.status === 'reclaimed' ? result.previous : undefined;
  return {
    group: request.group,
    key: request.key,
    status: 'SUCCESS',
    fingerprint: previous?.fingerprint ?? request.fingerprint,
    owner: result.claim.owner,
    attempt: result.claim.attempt,
    leaseUntil: null,
    brokerId: request.brokerId,
    topic: request.topic,
    remark: null,
    result: stored,
    createdAt: previous?.createdAt ?? now,
    updatedAt: now,
  };
}
