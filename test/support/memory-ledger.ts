import { randomUUID } from 'node:crypto';
import {
  decideExisting,
  RuntimeLedger,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type LeasedClaims,
  type LedgerBackend,
  type LedgerRecord,
  type Logger,
  type Purge,
} from 'oncemq';

/** The rows of one in-memory ledger, shared by every instance opened on it. */
export type MemoryRows = Map<string, LedgerRecord>;

const rowId = (group: string, key: string): string => JSON.stringify([group, key]);

/**
 * A leased ledger kept in a Map: the smallest complete backend. Every method runs synchronously, so
 * a claim is atomic in one process; instances sharing `rows` race like connections to one store.
 */
class MemoryBackend implements LedgerBackend<never> {
  readonly name = 'memory';
  readonly retentionMs = 7 * 86_400_000;

  constructor(
    private readonly rows: MemoryRows,
    private readonly clock: () => number,
  ) {}

  open(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  get(group: string, key: string): Promise<LedgerRecord | undefined> {
    return Promise.resolve(this.rows.get(rowId(group, key)));
  }

  /** Writes `change` into the row `claim` still owns as PROCESSING; false when it owns none. */
  #owned(claim: Claim, change: Partial<LedgerRecord> | 'delete'): boolean {
    const id = rowId(claim.group, claim.key);
    const row = this.rows.get(id);
    if (row?.status !== 'PROCESSING' || row.owner !== claim.owner || row.attempt !== claim.attempt)
      return false;
    if (change === 'delete') this.rows.delete(id);
    else this.rows.set(id, { ...row, ...change, updatedAt: new Date(this.clock()) });
    return true;
  }

  readonly leased: LeasedClaims = {
    claim: (request: ClaimRequest): Promise<ClaimResult> => {
      const now = this.clock();
      const existing = this.rows.get(rowId(request.group, request.key));
      if (existing !== undefined) {
        const decision = decideExisting(existing, request, now);
        if (decision !== 'reclaim') return Promise.resolve({ status: decision, record: existing });
      }
      const claim = {
        group: request.group,
        key: request.key,
        owner: randomUUID(),
        attempt: (existing?.attempt ?? 0) + 1,
        leaseUntil: new Date(now + request.leaseMs),
      };
      this.rows.set(rowId(request.group, request.key), {
        group: request.group,
        key: request.key,
        status: 'PROCESSING',
        fingerprint: existing?.fingerprint ?? request.fingerprint,
        owner: claim.owner,
        attempt: claim.attempt,
        leaseUntil: claim.leaseUntil,
        brokerId: request.brokerId,
        topic: request.topic,
        remark: null,
        result: null,
        createdAt: existing?.createdAt ?? new Date(now),
        updatedAt: new Date(now),
      });
      if (existing === undefined) return Promise.resolve({ status: 'acquired', claim });
      return Promise.resolve({ status: 'reclaimed', claim, previous: existing });
    },
    renew: (claim, leaseMs) => {
      const leaseUntil = new Date(this.clock() + leaseMs);
      return Promise.resolve(this.#owned(claim, { leaseUntil }) ? leaseUntil : undefined);
    },
    complete: (claim, result) =>
      Promise.resolve(this.#owned(claim, { status: 'SUCCESS', result, remark: null, leaseUntil: null })),
    fail: (claim, remark) =>
      Promise.resolve(this.#owned(claim, { status: 'FAIL', remark, leaseUntil: null })),
    release: (claim) => Promise.resolve(this.#owned(claim, 'delete')),
  };

  readonly purge: Purge = ({ olderThan, batchSize, maxBatches }) => {
    let deleted = 0;
    let batches = 0;
    while (batches < maxBatches) {
      const finished = [...this.rows].filter(
        ([, row]) => row.status !== 'PROCESSING' && row.updatedAt < olderThan,
      );
      for (const [id] of finished.slice(0, batchSize)) this.rows.delete(id);
      const count = Math.min(finished.length, batchSize);
      batches++;
      deleted += count;
      if (count < batchSize) break;
    }
    return Promise.resolve({ deleted, batches });
  };
}

/** A custom ledger: the runtime wraps the backend exactly as it wraps oncemq's own. */
export class MemoryLedger extends RuntimeLedger<never> {
  constructor(options: { rows?: MemoryRows; clock?: () => number; logger?: Logger } = {}) {
    super(new MemoryBackend(options.rows ?? new Map<string, LedgerRecord>(), options.clock ?? Date.now), {
      logger: options.logger,
    });
  }
}
