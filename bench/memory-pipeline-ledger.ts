import { planBatch, answerTwins, wonClaims } from '../src/ledger/batch-claim.js';
import { ClaimRound } from '../src/ledger/claim-round.js';
import {
  isWon,
  type BatchWork,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type LedgerRecord,
  type TransactionWork,
} from '../src/ledger/ledger.js';
import type { LeasedClaims, LedgerBackend, TransactionalClaims } from '../src/ledger/ledger-backend.js';
import { RuntimeLedger } from '../src/ledger/runtime-ledger.js';
import { ConnectionQueue, settle } from '../src/ledger/sqlite/connection-queue.js';

/** The business state the bench's handlers write: points per user. */
export type Points = Map<string, number>;

/**
 * The rows of one in-memory ledger and the queue that gives them to one operation at a time: shared
 * by every instance opened on them, as connections share one database.
 */
export interface MemoryStore {
  readonly rows: Map<string, LedgerRecord>;
  readonly queue: ConnectionQueue;
}

/** An empty store. */
export function memoryStore(): MemoryStore {
  return { rows: new Map(), queue: new ConnectionQueue() };
}

const rowId = (group: string, key: string): string => `${group.length}:${group}:${key}`;

/**
 * A ledger kept in a Map, with every capability the pipeline's paths use (transactional, leased,
 * batch claims), so that `npm run bench -- pipeline` measures the pipeline's own work and nothing
 * else: no I/O, no driver, one operation at a time like the SQLite ledger. The handler's "transaction"
 * is the points map itself (a bench: its writes are not rolled back). Not a product: nothing durable.
 */
class MemoryPipelineBackend implements LedgerBackend<Points> {
  readonly name = 'memory';
  readonly retentionMs = 7 * 86_400_000;
  readonly traits = { concurrentConnections: false };
  readonly rows: Map<string, LedgerRecord>;
  readonly #queue: ConnectionQueue;

  constructor(
    private readonly points: Points,
    store: MemoryStore,
    private readonly clock: () => number,
  ) {
    this.rows = store.rows;
    this.#queue = store.queue;
  }

  open(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  get(group: string, key: string): Promise<LedgerRecord | undefined> {
    return Promise.resolve(this.rows.get(rowId(group, key)));
  }

  #claim(request: ClaimRequest, status: 'PROCESSING' | 'SUCCESS', now = this.clock()): ClaimResult {
    const id = rowId(request.group, request.key);
    const round = new ClaimRound(request, status, now);
    const existing = this.rows.get(id);
    if (existing !== undefined) {
      const answer = round.existing(existing);
      if (answer !== undefined) return answer;
    }
    this.rows.set(id, {
      group: request.group,
      key: request.key,
      status,
      fingerprint: request.fingerprint,
      owner: round.owner,
      attempt: (existing?.attempt ?? 0) + 1,
      leaseUntil: round.storedLease === null ? null : new Date(round.storedLease),
      brokerId: request.brokerId,
      topic: request.topic,
      remark: null,
      result: null,
      createdAt: existing?.createdAt ?? new Date(now),
      updatedAt: new Date(now),
    });
    return existing === undefined ? round.acquired() : round.reclaimed(existing);
  }

  #restore(id: string, before: LedgerRecord | undefined): void {
    if (before === undefined) this.rows.delete(id);
    else this.rows.set(id, before);
  }

  #storeResult(claim: Claim, result: string | null): void {
    const id = rowId(claim.group, claim.key);
    const row = this.rows.get(id);
    if (row !== undefined && result !== null) this.rows.set(id, { ...row, result });
  }

  /** Writes `change` into the row `claim` still owns as PROCESSING; false when it owns none. */
  #owned(claim: Claim, change: Partial<LedgerRecord> | 'delete'): Promise<boolean> {
    const id = rowId(claim.group, claim.key);
    const row = this.rows.get(id);
    if (row?.status !== 'PROCESSING' || row.owner !== claim.owner || row.attempt !== claim.attempt)
      return Promise.resolve(false);
    if (change === 'delete') this.rows.delete(id);
    else this.rows.set(id, { ...row, ...change, updatedAt: new Date(this.clock()) });
    return Promise.resolve(true);
  }

  readonly transactional: TransactionalClaims<Points> = {
    transaction: (request: ClaimRequest, work: TransactionWork<Points>) =>
      this.#queue.run(() => {
        const id = rowId(request.group, request.key);
        const before = this.rows.get(id);
        const result = this.#claim(request, 'SUCCESS');
        if (!isWon(result)) return result;
        return settle(
          () => work(this.points, result.claim),
          (stored) => {
            this.#storeResult(result.claim, stored);
            return result;
          },
          () => this.#restore(id, before),
        );
      }),
    recordFailure: (request: ClaimRequest, remark: string) =>
      this.#queue.run(() => {
        const id = rowId(request.group, request.key);
        const row = this.rows.get(id);
        const now = new Date(this.clock());
        if (row === undefined) {
          this.rows.set(id, {
            group: request.group,
            key: request.key,
            status: 'FAIL',
            fingerprint: request.fingerprint,
            owner: null,
            attempt: 1,
            leaseUntil: null,
            brokerId: request.brokerId,
            topic: request.topic,
            remark,
            result: null,
            createdAt: now,
            updatedAt: now,
          });
        } else if (row.status === 'FAIL') {
          this.rows.set(id, { ...row, attempt: row.attempt + 1, remark, updatedAt: now });
        }
      }),
  };

  readonly leased: LeasedClaims = {
    claim: (request) => this.#queue.run(() => this.#claim(request, 'PROCESSING')),
    renew: async (claim, leaseMs) => {
      const leaseUntil = new Date(this.clock() + leaseMs);
      return (await this.#owned(claim, { leaseUntil })) ? leaseUntil : undefined;
    },
    complete: (claim, result) =>
      this.#owned(claim, { status: 'SUCCESS', result, remark: null, leaseUntil: null }),
    fail: (claim, remark) => this.#owned(claim, { status: 'FAIL', remark, leaseUntil: null }),
    release: (claim) => this.#owned(claim, 'delete'),
  };

  readonly batchClaim = (
    requests: readonly ClaimRequest[],
    work: BatchWork<Points>,
  ): Promise<readonly ClaimResult[]> =>
    this.#queue.run(() => {
      const now = this.clock();
      const plan = planBatch(requests);
      const results: (ClaimResult | undefined)[] = requests.map(() => undefined);
      const before = new Map<string, LedgerRecord | undefined>();
      for (const index of plan.distinct) {
        const request = requests[index] as ClaimRequest;
        const id = rowId(request.group, request.key);
        before.set(id, this.rows.get(id));
        results[index] = this.#claim(request, 'SUCCESS', now);
      }
      const won = wonClaims(results);
      return settle(
        () => work(this.points, won),
        (stored) => {
          won.forEach(({ claim }, i) => this.#storeResult(claim, stored[i] ?? null));
          return answerTwins(plan, requests, results, (r) => this.rows.get(rowId(r.group, r.key)), now);
        },
        () => before.forEach((row, id) => this.#restore(id, row)),
      );
    });
}

/** The bench's in-memory ledger, wrapped by the runtime as every ledger is. */
export class MemoryPipelineLedger extends RuntimeLedger<Points> {
  constructor(points: Points, options: { store?: MemoryStore; clock?: () => number } = {}) {
    super(new MemoryPipelineBackend(points, options.store ?? memoryStore(), options.clock ?? Date.now));
  }
}
