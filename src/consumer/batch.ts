import type { Envelope } from '../core/envelope.js';
import type { Outcome } from '../core/outcome.js';
import { isThenable } from '../core/thenable.js';
import { isWon, type ClaimRequest, type ClaimResult, type WonClaim } from '../ledger/ledger.js';
import type { Readable, ReadDelivery } from './delivery-reader.js';
import type { DeliveryRunner } from './delivery-runner.js';
import { batchResults } from './handler.js';
import { NEVER_ABORTED, type HeldDelivery } from './lease-keeper.js';
import type { DeliveryTrace } from '../telemetry/delivery-trace.js';

/** A batch as the pipeline hands it over: every delivery read, and how to run one on its own. */
export interface BatchInput<Tx, T> {
  readonly runner: DeliveryRunner<Tx, T>;
  readonly mode: 'transactional' | 'leased';
  /** Each delivery of the batch, read, in delivery order. */
  readonly deliveries: readonly ReadDelivery<T>[];
  /** Runs one read delivery to its recorded outcome (process()'s path), for fallbacks. */
  readonly one: (delivery: Readable<T>) => Promise<Outcome>;
  /** Records an outcome (counts, logs, tells the listener, ends the delivery's trace) and returns it. */
  readonly record: (outcome: Outcome, trace: DeliveryTrace) => Outcome;
  readonly started: number;
}

interface Claimable<T> {
  /** Position in the batch. */
  readonly index: number;
  readonly delivery: Readable<T>;
}

/**
 * Runs a batch of read deliveries to their outcomes, in delivery order, with process()'s semantics.
 * Deliveries that could not be read are answered by the caller; `outcomes` holds their answers.
 * - Transactional mode on a ledger with batch claims: one claim statement and one transaction (one
 *   commit) for the whole batch, the handler running once per won key inside it. If any handler
 *   throws, the batch rolls back and every delivery of it is processed on its own, so one poison
 *   message fails alone.
 * - Leased mode: the claims of the whole batch are made at once (a Redis ledger sends them as one
 *   script call) and every won lease is held and renewed from then on; the handlers then run one
 *   after another in delivery order, each completed (or failed) on its own.
 * - Otherwise the deliveries run one by one.
 */
export async function runBatch<Tx, T>(
  input: BatchInput<Tx, T>,
  outcomes: (Outcome | undefined)[],
): Promise<void> {
  const claimable: Claimable<T>[] = [];
  for (let index = 0; index < input.deliveries.length; index++) {
    const delivery = input.deliveries[index] as ReadDelivery<T>;
    if (delivery.ok) claimable.push({ index, delivery });
  }
  if (claimable.length === 0) return;
  if (input.mode === 'leased') {
    await runLeased(input, claimable, outcomes);
  } else if (input.runner.ledger.capabilities.batchClaim) {
    await runTransactional(input, claimable, outcomes);
  } else {
    for (const { index, delivery } of claimable) outcomes[index] = await input.one(delivery);
  }
}

/** The transactional batch: one claim statement and one commit, each delivery on its own if it fails. */
async function runTransactional<Tx, T>(
  input: BatchInput<Tx, T>,
  claimable: readonly Claimable<T>[],
  outcomes: (Outcome | undefined)[],
): Promise<void> {
  const { runner, started } = input;
  // The handler's value of each won claim, by its position in `claimable`.
  const values: unknown[] = [];
  const envelopes: Envelope[] = [];
  const requests: ClaimRequest[] = [];
  for (const { delivery } of claimable) {
    envelopes.push(delivery.envelope);
    requests.push(delivery.request);
    delivery.trace.claimStarted();
  }
  const stop = runner.keepAlive(envelopes);
  let claimed: readonly ClaimResult[] | undefined;
  try {
    claimed = await runner.ledger.transactionMany(requests, async (tx, won) => {
      const items = won.map(({ index, claim }) => {
        const item = claimable[index];
        if (item === undefined) throw new Error(`batch claim answered an unknown index ${index}`);
        item.delivery.trace.claimed(claim.attempt > 1 ? 'reclaimed' : 'acquired');
        return { index, claim, delivery: item.delivery };
      });
      const batchHandler = runner.batchHandler;
      if (batchHandler !== undefined && items.length > 0) {
        const events = items.map(({ delivery, claim }) => ({
          message: delivery.message,
          context: runner.context(delivery, claim, tx, NEVER_ABORTED),
        }));
        const out = batchHandler(events, { tx, group: runner.group });
        const results = batchResults(isThenable(out) ? await out : out, items.length);
        items.forEach(({ index }, i) => {
          values[index] = results[i];
        });
      } else {
        for (const { index, claim, delivery } of items) {
          const out = runner.handle(delivery, claim, tx, NEVER_ABORTED);
          values[index] = isThenable(out) ? await out : out;
        }
      }
      return items.map(({ index }) => runner.store(values[index]));
    });
  } catch {
    // A handler (or the ledger) failed: the whole batch rolled back. Each delivery on its own.
    claimed = undefined;
  } finally {
    stop?.();
  }
  for (let i = 0; i < claimable.length; i++) {
    const { index, delivery } = claimable[i] as Claimable<T>;
    const result = claimed?.[i];
    if (result === undefined) {
      outcomes[index] = await input.one(delivery);
    } else {
      if (isWon(result)) delivery.trace.committed();
      outcomes[index] = input.record(
        isWon(result)
          ? runner.executed(delivery, result, started, values[i])
          : runner.notWon(delivery, result, started),
        delivery.trace,
      );
    }
  }
}

type LeasedAnswer =
  | { readonly won: true; readonly claimed: WonClaim; readonly held: HeldDelivery }
  | { readonly won: false; readonly claimed: Exclude<ClaimResult, WonClaim> }
  | { readonly error: unknown }
  | { readonly later: true };

/** The leased batch: every claim at once, every won lease held from then on, the handlers in order. */
async function runLeased<Tx, T>(
  input: BatchInput<Tx, T>,
  claimable: readonly Claimable<T>[],
  outcomes: (Outcome | undefined)[],
): Promise<void> {
  const { runner, started } = input;
  // A key that comes again later in the batch is claimed at its turn, after the first copy finished,
  // so that it answers as it would one by one ("duplicate" or "conflict"), not "busy".
  const seen = new Set<string>();
  const sentAt = Date.now();
  const answers = await Promise.all(
    claimable.map(({ delivery }): Promise<LeasedAnswer> => {
      if (seen.has(delivery.key)) return Promise.resolve({ later: true });
      seen.add(delivery.key);
      delivery.trace.claimStarted();
      return runner.ledger.claim(delivery.request).then(
        (claimed): LeasedAnswer => {
          delivery.trace.claimed(claimed.status);
          return isWon(claimed)
            ? { won: true, claimed, held: runner.hold(claimed, sentAt, delivery.envelope) }
            : { won: false, claimed };
        },
        (error: unknown): LeasedAnswer => ({ error }),
      );
    }),
  );
  // Completions (and failure records) are settled at the end, so they can share round trips; each is
  // caught at once, so a failing one never goes unhandled while later handlers run.
  const settling: Promise<void>[] = [];
  let settledAll: PromiseSettledResult<void>[] = [];
  let next = 0;
  try {
    for (const [i, { index, delivery }] of claimable.entries()) {
      next = i + 1;
      const answer = answers[i];
      if (answer === undefined) throw new Error(`no claim answer for delivery ${index}`);
      if ('later' in answer) {
        await Promise.all(settling); // its first copy must be recorded before it claims
        outcomes[index] = await input.one(delivery);
      } else if ('error' in answer) {
        outcomes[index] = input.record(runner.unavailable(delivery, answer.error, started), delivery.trace);
      } else if (answer.won) {
        const run = runner.runHeld(delivery, answer.claimed, answer.held, started);
        const { settled } = isThenable(run) ? await run : run;
        settling.push(
          settled.then((outcome) => {
            outcomes[index] = input.record(outcome, delivery.trace);
          }),
        );
      } else {
        outcomes[index] = input.record(runner.notWon(delivery, answer.claimed, started), delivery.trace);
      }
    }
  } finally {
    // Cut short (the pipeline closed under the batch): stop renewing the leases whose handlers never
    // ran, so their keys become reclaimable once the leases run out, instead of staying held.
    for (const answer of answers.slice(next)) {
      if ('won' in answer && answer.won) runner.releaseHeld(answer.held);
    }
    settledAll = await Promise.allSettled(settling);
  }
  const failure = settledAll.find((r) => r.status === 'rejected');
  if (failure !== undefined) throw failure.reason;
}
