import type { Envelope } from '../core/envelope.js';
import { ConfigError, type PermanentError } from '../core/errors.js';
import type { Outcome } from '../core/outcome.js';
import type { Claim, ClaimRequest, ClaimResult, Ledger } from '../ledger/ledger.js';

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

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

/**
 * Processes a batch of deliveries: in transactional mode on a ledger with batch claims, one claim
 * statement and one transaction (one commit) for the whole batch, the handler running once per won
 * key inside it. If any handler throws, the batch rolls back and every delivery of it is processed
 * on its own, so one poison message fails alone. Otherwise (leased mode, no batch claims) the
 * deliveries run one by one. Outcomes come back in delivery order, with process()'s semantics.
 */
export async function processBatch<Tx, T>(
  internals: BatchInternals<Tx, T>,
  envelopes: readonly Envelope[],
): Promise<Outcome[]> {
  const { ledger } = internals;
  const many = ledger.transactionMany?.bind(ledger);
  if (internals.mode !== 'transactional' || !ledger.capabilities.batchClaim || many === undefined) {
    const outcomes: Outcome[] = [];
    for (const envelope of envelopes) outcomes.push(await internals.process(envelope));
    return outcomes;
  }
  const started = performance.now();
  const outcomes: (Outcome | undefined)[] = envelopes.map(() => undefined);
  const claimable: { index: number; envelope: Envelope; parsed: ParsedDelivery<T> & { ok: true } }[] = [];
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
      } else if (result.status === 'acquired' || result.status === 'reclaimed') {
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
  return outcomes as Outcome[];
}
