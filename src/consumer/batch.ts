import type { Outcome } from '../core/outcome.js';
import { isThenable } from '../core/thenable.js';
import { isWon, type ClaimRequest, type ClaimResult, type WonClaim } from '../ledger/ledger.js';
import type { Readable } from './delivery-reader.js';
import type { DeliveryRunner } from './delivery-runner.js';
import { batchResults } from './handler.js';
import { NEVER_ABORTED, type HeldDelivery } from './lease-keeper.js';
import type { DeliveryTrace } from '../telemetry/delivery-trace.js';

/** A batch as the pipeline hands it over: its readable deliveries, and how to run one on its own. */
export interface BatchInput<Tx, T> {
  readonly runner: DeliveryRunner<Tx, T>;
  readonly mode: 'transactional' | 'leased';
  /** The deliveries of the batch that were read, in delivery order. */
  readonly deliveries: readonly Readable<T>[];
  /** Where each of {@link deliveries} stands in the batch (its index in `outcomes`). */
  readonly positions: readonly number[];
  /** Runs one read delivery to its recorded outcome (process()'s path), for fallbacks. */
  readonly one: (delivery: Readable<T>) => Promise<Outcome>;
  /** Records an outcome (counts, logs, tells the listener, ends the delivery's trace) and returns it. */
  readonly record: (outcome: Outcome, trace: DeliveryTrace) => Outcome;
  readonly started: number;
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
  const { deliveries, positions } = input;
  if (deliveries.length === 0) return;
  if (input.mode === 'leased') {
    await runLeased(input, outcomes);
  } else if (input.runner.ledger.capabilities.batchClaim) {
    await runTransactional(input, outcomes);
  } else {
    for (const [i, delivery] of deliveries.entries())
      outcomes[positions[i] as number] = await input.one(delivery);
  }
}

/**
 * The transactional batch: one claim statement and one commit, each delivery on its own if it fails.
 * Per delivery it keeps only what the answer needs: the handler's value, by its place in the batch.
 */
async function runTransactional<Tx, T>(
  input: BatchInput<Tx, T>,
  outcomes: (Outcome | undefined)[],
): Promise<void> {
  const { runner, started, deliveries, positions } = input;
  const values: unknown[] = [];
  const requests: ClaimRequest[] = [];
  for (const delivery of deliveries) {
    requests.push(delivery.request);
    delivery.trace.claimStarted();
  }
  const stop = runner.keepAlive(deliveries);
  let claimed: readonly ClaimResult[] | undefined;
  try {
    claimed = await runner.ledger.transactionMany(requests, async (tx, won) => {
      const at = (index: number): Readable<T> => {
        const delivery = deliveries[index];
        if (delivery === undefined) throw new Error(`batch claim answered an unknown index ${index}`);
        return delivery;
      };
      // Index loops: an iterator's result objects would outlive the awaits below, one per delivery.
      for (let w = 0; w < won.length; w++) {
        const { index, claim } = won[w] as (typeof won)[number];
        at(index).trace.claimed(claim.attempt > 1 ? 'reclaimed' : 'acquired');
      }
      const batchHandler = runner.batchHandler;
      if (batchHandler !== undefined && won.length > 0) {
        const events = won.map(({ index, claim }) => ({
          message: at(index).message,
          context: runner.context(at(index), claim, tx, NEVER_ABORTED),
        }));
        const out = batchHandler(events, { tx, group: runner.group });
        const results = batchResults(isThenable(out) ? await out : out, won.length);
        won.forEach(({ index }, i) => {
          values[index] = results[i];
        });
      } else {
        for (let w = 0; w < won.length; w++) {
          const { index, claim } = won[w] as (typeof won)[number];
          const out = runner.handle(at(index), claim, tx, NEVER_ABORTED);
          values[index] = isThenable(out) ? await out : out;
        }
      }
      return won.map(({ index }) => runner.store(values[index]));
    });
  } catch {
    // A handler (or the ledger) failed: the whole batch rolled back. Each delivery on its own.
    claimed = undefined;
  } finally {
    stop?.();
  }
  for (let i = 0; i < deliveries.length; i++) {
    const delivery = deliveries[i] as Readable<T>;
    const position = positions[i] as number;
    const result = claimed?.[i];
    if (result === undefined) {
      outcomes[position] = await input.one(delivery);
    } else {
      if (isWon(result)) delivery.trace.committed();
      outcomes[position] = input.record(
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
async function runLeased<Tx, T>(input: BatchInput<Tx, T>, outcomes: (Outcome | undefined)[]): Promise<void> {
  const { runner, started, deliveries, positions } = input;
  // A key that comes again later in the batch is claimed at its turn, after the first copy finished,
  // so that it answers as it would one by one ("duplicate" or "conflict"), not "busy".
  const seen = new Set<string>();
  const sentAt = Date.now();
  const answers = await Promise.all(
    deliveries.map((delivery): Promise<LeasedAnswer> => {
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
    for (const [i, delivery] of deliveries.entries()) {
      const index = positions[i] as number;
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
