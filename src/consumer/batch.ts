import type { Envelope } from '../core/envelope.js';
import { ConfigError, type PermanentError } from '../core/errors.js';
import type { Outcome } from '../core/outcome.js';
import { isThenable } from '../core/thenable.js';
import {
  isWon,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type Ledger,
  type WonClaim as Won,
} from '../ledger/ledger.js';
import type { HeldLease } from './lease-keeper.js';

/** A delivery read into its key, message and claim request (or the permanent error that stops it). */
export type ParsedDelivery<T> =
  | { readonly ok: true; readonly key: string; readonly message: T; readonly request: ClaimRequest }
  | { readonly ok: false; readonly key: string | null; readonly error: PermanentError };

/** The parts of a pipeline that batch processing reuses, so that a batch answers exactly like process(). */
export interface BatchInternals<Tx, T> {
  readonly ledger: Ledger<Tx>;
  readonly mode: 'transactional' | 'leased';
  readonly parse: (envelope: Envelope) => ParsedDelivery<T>;
  readonly ensureInit: () => Promise<void>;
  /** Leased mode: starts renewing the lease of a won claim. */
  readonly holdLease: (claim: Claim) => HeldLease;
  /** Leased mode: stops renewing a held lease. */
  readonly releaseLease: (lease: HeldLease) => void;
  /** Leased mode: runs the handler of a won claim whose lease is held, then starts completing or failing it. */
  readonly runHeld: (
    envelope: Envelope,
    parsed: ParsedDelivery<T> & { ok: true },
    claimed: Extract<ClaimResult, { status: 'acquired' | 'reclaimed' }>,
    lease: HeldLease,
    started: number,
  ) => Promise<{ readonly settled: Promise<Outcome> }>;
  /** Runs the handler for one won claim inside the batch transaction; returns its (unserialized) value. */
  readonly runHandler: (
    envelope: Envelope,
    parsed: ParsedDelivery<T> & { ok: true },
    claim: Claim,
    tx: Tx,
  ) => unknown;
  readonly store: (value: unknown) => string | null;
  readonly executed: (
    envelope: Envelope,
    key: string,
    claimed: ClaimResult & { claim: Claim },
    value: unknown,
    started: number,
  ) => Outcome;
  readonly notWon: (
    envelope: Envelope,
    key: string,
    claimed: Exclude<ClaimResult, { status: 'acquired' | 'reclaimed' }>,
    started: number,
    fingerprint: string | null,
  ) => Outcome;
  readonly failed: (envelope: Envelope, key: string | null, error: unknown, started: number) => Outcome;
  readonly unavailable: (envelope: Envelope, key: string, error: unknown, started: number) => Outcome;
  readonly finish: (outcome: Outcome) => Outcome;
  /** The single-delivery path, used for fallbacks. */
  readonly process: (envelope: Envelope) => Promise<Outcome>;
}

interface Claimable<T> {
  readonly index: number;
  readonly envelope: Envelope;
  readonly parsed: ParsedDelivery<T> & { ok: true };
}

/**
 * Processes a batch of deliveries, answering in delivery order with process()'s semantics.
 * - Transactional mode on a ledger with batch claims: one claim statement and one transaction (one
 *   commit) for the whole batch, the handler running once per won key inside it. If any handler
 *   throws, the batch rolls back and every delivery of it is processed on its own, so one poison
 *   message fails alone.
 * - Leased mode: the claims of the whole batch are made at once (a Redis ledger sends them as one
 *   script call) and every won lease is held and renewed from then on; the handlers then run one
 *   after another in delivery order, each completed (or failed) on its own.
 * - Otherwise the deliveries run one by one.
 */
export async function processBatch<Tx, T>(
  internals: BatchInternals<Tx, T>,
  envelopes: readonly Envelope[],
): Promise<Outcome[]> {
  const { ledger } = internals;
  const leased = internals.mode === 'leased';
  const many = leased || !ledger.capabilities.batchClaim ? undefined : ledger.transactionMany.bind(ledger);
  if (!leased && many === undefined) {
    const outcomes: Outcome[] = [];
    for (const envelope of envelopes) outcomes.push(await internals.process(envelope));
    return outcomes;
  }
  const started = performance.now();
  const outcomes: (Outcome | undefined)[] = envelopes.map(() => undefined);
  const claimable: Claimable<T>[] = [];
  envelopes.forEach((envelope, index) => {
    const parsed = internals.parse(envelope);
    if (parsed.ok) claimable.push({ index, envelope, parsed });
    else outcomes[index] = internals.finish(internals.failed(envelope, parsed.key, parsed.error, started));
  });
  if (claimable.length > 0) {
    try {
      await internals.ensureInit();
    } catch (error) {
      if (error instanceof ConfigError) throw error;
      for (const { index, envelope, parsed } of claimable) {
        outcomes[index] = internals.finish(internals.unavailable(envelope, parsed.key, error, started));
      }
      return outcomes as Outcome[];
    }
    // Past the check above, a batch without transactionMany() is a leased one.
    if (many === undefined) await processLeased(internals, claimable, outcomes, started);
    else await processTransactional(internals, many, claimable, outcomes, started);
  }
  return outcomes as Outcome[];
}

/** The transactional batch: one claim statement and one commit, each delivery on its own if it fails. */
async function processTransactional<Tx, T>(
  internals: BatchInternals<Tx, T>,
  many: NonNullable<Ledger<Tx>['transactionMany']>,
  claimable: readonly Claimable<T>[],
  outcomes: (Outcome | undefined)[],
  started: number,
): Promise<void> {
  const values = new Map<number, unknown>();
  let claimed: readonly ClaimResult[] | undefined;
  try {
    claimed = await many(
      claimable.map((c) => c.parsed.request),
      async (tx, won) => {
        const results: (string | null)[] = [];
        for (const { index, claim } of won) {
          const item = claimable[index];
          if (item === undefined) throw new Error(`batch claim answered an unknown index ${index}`);
          const out = internals.runHandler(item.envelope, item.parsed, claim, tx);
          const value = isThenable(out) ? await out : out;
          values.set(index, value);
          results.push(internals.store(value));
        }
        return results;
      },
    );
  } catch {
    // A handler (or the ledger) failed: the whole batch rolled back. Each delivery on its own.
    claimed = undefined;
  }
  for (const [i, { index, envelope, parsed }] of claimable.entries()) {
    const result = claimed?.[i];
    if (result === undefined) {
      outcomes[index] = await internals.process(envelope);
    } else if (isWon(result)) {
      outcomes[index] = internals.finish(
        internals.executed(envelope, parsed.key, result, values.get(i), started),
      );
    } else {
      outcomes[index] = internals.finish(
        internals.notWon(envelope, parsed.key, result, started, parsed.request.fingerprint),
      );
    }
  }
}

/** The leased batch: every claim at once, every won lease held from then on, the handlers in order. */
async function processLeased<Tx, T>(
  internals: BatchInternals<Tx, T>,
  claimable: readonly Claimable<T>[],
  outcomes: (Outcome | undefined)[],
  started: number,
): Promise<void> {
  type Answer =
    | { readonly won: true; readonly claimed: Won; readonly lease: HeldLease }
    | { readonly won: false; readonly claimed: Exclude<ClaimResult, Won> }
    | { readonly error: unknown }
    | { readonly later: true };
  // A key that comes again later in the batch is claimed at its turn, after the first copy finished,
  // so that it answers "duplicate" as it would one by one, not "busy".
  const seen = new Set<string>();
  const answers = await Promise.all(
    claimable.map(({ parsed }): Promise<Answer> => {
      if (seen.has(parsed.key)) return Promise.resolve({ later: true });
      seen.add(parsed.key);
      return internals.ledger.claim(parsed.request).then(
        (claimed): Answer =>
          isWon(claimed)
            ? { won: true, claimed, lease: internals.holdLease(claimed.claim) }
            : { won: false, claimed },
        (error: unknown): Answer => ({ error }),
      );
    }),
  );
  // Completions (and failure records) are settled at the end, so they can share round trips; each is
  // caught at once, so a failing one never goes unhandled while later handlers run.
  const settling: Promise<void>[] = [];
  let settledAll: PromiseSettledResult<void>[] = [];
  let next = 0;
  try {
    for (const [i, { index, envelope, parsed }] of claimable.entries()) {
      next = i + 1;
      const answer = answers[i];
      if (answer === undefined) throw new Error(`no claim answer for delivery ${index}`);
      if ('later' in answer) {
        await Promise.all(settling); // its first copy must be recorded before it claims
        outcomes[index] = await internals.process(envelope);
      } else if ('error' in answer) {
        outcomes[index] = internals.finish(
          internals.unavailable(envelope, parsed.key, answer.error, started),
        );
      } else if (answer.won) {
        const { settled } = await internals.runHeld(envelope, parsed, answer.claimed, answer.lease, started);
        settling.push(
          settled.then((outcome) => {
            outcomes[index] = internals.finish(outcome);
          }),
        );
      } else {
        outcomes[index] = internals.finish(
          internals.notWon(envelope, parsed.key, answer.claimed, started, parsed.request.fingerprint),
        );
      }
    }
  } finally {
    // Cut short (the pipeline closed under the batch): stop renewing the leases whose handlers never
    // ran, so their keys become reclaimable once the leases run out, instead of staying held.
    for (const answer of answers.slice(next)) {
      if ('won' in answer && answer.won) internals.releaseLease(answer.lease);
    }
    settledAll = await Promise.allSettled(settling);
  }
  const failure = settledAll.find((r) => r.status === 'rejected');
  if (failure !== undefined) throw failure.reason;
}
