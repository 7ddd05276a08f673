import { LedgerUnavailableError } from '../core/errors.js';
import { decideExisting } from './claim-decision.js';
import type { Claim, ClaimRequest, ClaimResult, LedgerRecord } from './ledger.js';
import { ownerToken } from './owner-token.js';

/** What the SQLite and MySQL ledgers bind to a `?` placeholder of a claim statement. */
export type ClaimValue = string | number | null;

/**
 * One round of a single-key claim on a ledger whose insert and reclaim bind `?` placeholders in the
 * same order (SQLite, MySQL): a fresh owner token and lease, the values each statement binds, and the
 * answer each outcome gives. The ledger runs the statements itself, synchronously or not, and starts
 * another round when the row changed under it.
 */
export class ClaimRound {
  readonly owner = ownerToken();
  readonly leaseUntil: number;
  /** What the row stores as its lease: a transactional claim commits as SUCCESS, without one. */
  readonly storedLease: number | null;

  constructor(
    readonly request: ClaimRequest,
    readonly status: 'PROCESSING' | 'SUCCESS',
    readonly now: number,
  ) {
    this.leaseUntil = now + request.leaseMs;
    this.storedLease = status === 'PROCESSING' ? this.leaseUntil : null;
  }

  /** The insert's values: group, key, status, fingerprint, owner, lease, broker id, topic, created, updated. */
  insertValues(): ClaimValue[] {
    const { request: r, owner, storedLease, now } = this;
    return [r.group, r.key, this.status, r.fingerprint, owner, storedLease, r.brokerId, r.topic, now, now];
  }

  /** The answer when the insert made the row. */
  acquired(): ClaimResult {
    return { status: 'acquired', claim: this.#claim(1) };
  }

  /** The answer for a row that is already there (decideExisting), or undefined when it is to be taken over. */
  existing(record: LedgerRecord): ClaimResult | undefined {
    const decision = decideExisting(record, this.request, this.now);
    return decision === 'reclaim' ? undefined : { status: decision, record };
  }

  /**
   * The reclaim's values: the status, owner, lease, broker id, topic, fingerprint and update time it sets,
   * then the row's group and key and the status, attempt and owner it must still have.
   */
  reclaimValues(record: LedgerRecord): ClaimValue[] {
    const r = this.request;
    const sets = [this.status, this.owner, this.storedLease, r.brokerId, r.topic, r.fingerprint, this.now];
    return [...sets, r.group, r.key, record.status, record.attempt, record.owner];
  }

  /** The answer when the reclaim took `record` over. */
  reclaimed(record: LedgerRecord): ClaimResult {
    return { status: 'reclaimed', claim: this.#claim(record.attempt + 1), previous: record };
  }

  #claim(attempt: number): Claim {
    const r = this.request;
    return { group: r.group, key: r.key, owner: this.owner, attempt, leaseUntil: new Date(this.leaseUntil) };
  }
}

/**
 * The answer when every round lost its race: `busy` on the last row seen. A row that vanished every
 * time is a failure, not an answer.
 */
export function lostEveryRound(request: ClaimRequest, record: LedgerRecord | undefined): ClaimResult {
  if (record === undefined)
    throw new LedgerUnavailableError(`claim of ${request.key} kept racing with deletes`);
  return { status: 'busy', record };
}
