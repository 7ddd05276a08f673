import type { Envelope } from '../core/envelope.js';
import { errorText, LeaseLostError, LedgerUnavailableError, PermanentError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Outcome } from '../core/outcome.js';
import type { Serializer } from '../core/serializer.js';
import { isThenable } from '../core/thenable.js';
import { isWon, type Claim, type ClaimResult, type Ledger, type WonClaim } from '../ledger/ledger.js';
import type { Readable } from './delivery-reader.js';
import type { BatchHandler, Handler } from './handler.js';
import { PipelineContext, type HandlerContext, type Mode } from './handler-context.js';
import {
  keepAlive,
  NEVER_ABORTED,
  type HeldDelivery,
  type LeaseKeeper,
  type SignalSource,
} from './lease-keeper.js';
import type { Outbox } from '../outbox/outbox.js';
import type { OutcomeBuilder } from './outcome-builder.js';
import type { RetryPolicy } from '../core/retry-policy.js';
import { runAsIs } from '../telemetry/delivery-trace.js';

/** What the runner needs, resolved once from the pipeline's configuration. */
export interface RunnerConfig<Tx, T> {
  readonly group: string;
  readonly mode: Mode;
  readonly ledger: Ledger<Tx>;
  readonly handler: Handler<Tx, T>;
  /** Transactional batches on a ledger with batch claims hand their won events to it at once. */
  readonly batchHandler: BatchHandler<Tx, T> | undefined;
  readonly retry: RetryPolicy;
  readonly serializer: Serializer;
  readonly onFailure: 'fail' | 'release';
  readonly leases: LeaseKeeper;
  readonly outcomes: OutcomeBuilder;
  /** Bound to each delivery's transaction as `ctx.outbox`. */
  readonly outbox: Outbox<Tx> | undefined;
  readonly logger: Logger;
}

/** A won leased claim whose handler ran: its outcome is known once `settled` resolves. */
export interface HeldRun {
  readonly settled: Promise<Outcome>;
}

/** A held delivery on its way through its handler's attempts. */
interface HeldRunState<T> {
  readonly delivery: Readable<T>;
  readonly claimed: WonClaim;
  readonly held: HeldDelivery;
  readonly started: number;
}

const settledOf = (run: HeldRun): Promise<Outcome> => run.settled;

/**
 * The steps that take one read delivery to its outcome: claim, run the handler, complete or fail,
 * and say what to do. `process()` runs one delivery through them; batches (batch.ts) run the same
 * steps for many deliveries at once, so that a batch answers exactly like one by one.
 */
export class DeliveryRunner<Tx, T> {
  constructor(private readonly config: RunnerConfig<Tx, T>) {}

  get group(): string {
    return this.config.group;
  }

  get ledger(): Ledger<Tx> {
    return this.config.ledger;
  }

  get outcomes(): OutcomeBuilder {
    return this.config.outcomes;
  }

  /** The handler's result as stored in the ledger; a result that cannot be stored is the handler's error. */
  store(value: unknown): string | null {
    if (value === undefined) return null;
    try {
      return this.config.serializer.serialize(value);
    } catch (error) {
      throw new PermanentError(
        'unserializable-result',
        `cannot store the handler's result: ${errorText(error)}`,
        {
          cause: error,
        },
      );
    }
  }

  /** The context a handler gets for a won claim. */
  context(delivery: Readable<T>, claim: Claim, tx: Tx | undefined, signal: SignalSource): HandlerContext<Tx> {
    const { group, mode } = this.config;
    return new PipelineContext(
      delivery.envelope,
      group,
      delivery.key,
      claim.attempt,
      mode,
      tx,
      signal,
      this.config.outbox,
    );
  }

  /** Calls the handler for a won claim, with its context, inside the delivery's trace. */
  handle(delivery: Readable<T>, claim: Claim, tx: Tx | undefined, signal: SignalSource): unknown {
    const context = this.context(delivery, claim, tx, signal);
    const { trace } = delivery;
    if (trace.handler === runAsIs) return this.config.handler(delivery.message, context);
    return trace.handler(() => this.config.handler(delivery.message, context));
  }

  /** The batch handler, when the pipeline has one. */
  get batchHandler(): BatchHandler<Tx, T> | undefined {
    return this.config.batchHandler;
  }

  /** {@link keepAlive} of the deliveries' envelopes, by this pipeline's lease keeper. */
  keepAlive(deliveries: readonly { readonly envelope: Envelope }[]): (() => void) | undefined {
    return keepAlive(this.config.leases, deliveries);
  }

  executed(
    delivery: Readable<T>,
    claimed: WonClaim,
    started: number,
    value: unknown,
    leaseLost = false,
  ): Outcome {
    return this.config.outcomes.executed(delivery.envelope, delivery.key, started, claimed.claim, {
      reclaimed: claimed.status === 'reclaimed',
      leaseLost,
      result: value,
    });
  }

  notWon(delivery: Readable<T>, claimed: Exclude<ClaimResult, WonClaim>, started: number): Outcome {
    return this.config.outcomes.notWon(
      delivery.envelope,
      delivery.key,
      claimed,
      started,
      delivery.request.fingerprint,
    );
  }

  unavailable(delivery: Readable<T>, error: unknown, started: number): Outcome {
    return this.config.outcomes.unavailable(delivery.envelope, delivery.key, error, started);
  }

  /**
   * Transactional mode: claim, handler and completion in one local transaction of the ledger. The
   * outcome is `executed` only once the transaction has committed; a commit that fails after a
   * successful handler is a retry, never an ack.
   */
  async transactional(delivery: Readable<T>, started: number): Promise<Outcome> {
    const { ledger, retry } = this.config;
    // Most envelopes have no keep-alive: no array, no closure for them.
    const stop =
      delivery.envelope.keepAlive === undefined ? undefined : keepAlive(this.config.leases, [delivery]);
    try {
      for (let run = 0; ; run++) {
        let value: unknown;
        const handler = { failed: false };
        delivery.trace.claimStarted();
        try {
          const claimed = await ledger.transaction(delivery.request, (tx, claim) => {
            delivery.trace.claimed(claim.attempt > 1 ? 'reclaimed' : 'acquired');
            let out: unknown;
            try {
              out = this.handle(delivery, claim, tx, NEVER_ABORTED);
            } catch (error) {
              handler.failed = true;
              throw error;
            }
            if (!isThenable(out)) return this.store((value = out));
            return Promise.resolve(out).then(
              (resolved) => this.store((value = resolved)),
              (error: unknown) => {
                handler.failed = true;
                throw error;
              },
            );
          });
          if (!isWon(claimed)) {
            delivery.trace.claimed(claimed.status);
            return this.notWon(delivery, claimed, started);
          }
          delivery.trace.committed();
          return this.executed(delivery, claimed, started, value);
        } catch (error) {
          if (!handler.failed && error instanceof LedgerUnavailableError)
            return this.unavailable(delivery, error, started);
          if (!(error instanceof PermanentError) && run < retry.immediate) continue;
          await this.#recordFailure(delivery, error);
          return this.config.outcomes.failed(delivery.envelope, delivery.key, error, started);
        }
      }
    } finally {
      stop?.();
    }
  }

  async #recordFailure(delivery: Readable<T>, error: unknown): Promise<void> {
    try {
      await this.config.ledger.recordFailure(delivery.request, errorText(error));
    } catch (recordError) {
      this.config.logger.warn('oncemq: could not record a failed attempt', {
        group: this.config.group,
        key: delivery.key,
        error: errorText(recordError),
      });
    }
  }

  /**
   * Leased mode, one delivery: claim, hold the lease, run, complete. A chain of reactions rather
   * than an async function: a synchronous handler costs no turn of its own.
   */
  leased(delivery: Readable<T>, started: number): Promise<Outcome> {
    const sentAt = Date.now();
    delivery.trace.claimStarted();
    return this.config.ledger.claim(delivery.request).then(
      (claimed) => {
        try {
          delivery.trace.claimed(claimed.status);
        } catch (error) {
          return this.unavailable(delivery, error, started);
        }
        if (!isWon(claimed)) return this.notWon(delivery, claimed, started);
        const run = this.runHeld(delivery, claimed, this.hold(claimed, sentAt, delivery.envelope), started);
        return isThenable(run) ? run.then(settledOf) : run.settled;
      },
      (error: unknown) =>
        // A request the ledger can never store (a key past its limits) is a dead letter, not an outage.
        error instanceof PermanentError
          ? this.config.outcomes.failed(delivery.envelope, delivery.key, error, started)
          : this.unavailable(delivery, error, started),
    );
  }

  /** Starts keeping the lease of a won leased claim (sent at `sentAt`) and the delivery's keep-alive. */
  hold(claimed: WonClaim, sentAt: number, envelope: Envelope): HeldDelivery {
    return this.config.leases.hold(claimed.claim, sentAt, envelope.keepAlive);
  }

  /** Stops keeping a held delivery whose handler will not run. */
  releaseHeld(held: HeldDelivery): void {
    this.config.leases.release(held);
  }

  /**
   * Runs the handler of a won leased claim whose lease is held, then starts completing (or failing)
   * the claim: `settled` gives the outcome once the ledger has recorded it. A batch runs its next
   * handler while this completion is on its way, so concurrent completions can share a round trip.
   * Answers at once (no promise) when the handler returned at once.
   */
  runHeld(
    delivery: Readable<T>,
    claimed: WonClaim,
    held: HeldDelivery,
    started: number,
  ): HeldRun | Promise<HeldRun> {
    const lostWhileWaiting = held.lostError;
    if (lostWhileWaiting !== undefined) {
      // Lost while the delivery waited its turn in a batch: someone else may hold the key now.
      this.config.leases.release(held);
      return { settled: Promise.resolve(this.unavailable(delivery, lostWhileWaiting, started)) };
    }
    return this.#attempt({ delivery, claimed, held, started }, 0);
  }

  /** Run `run` of a held delivery's handler (0 first), again on failure while `retry.immediate` allows. */
  #attempt(run: HeldRunState<T>, attempt: number): HeldRun | Promise<HeldRun> {
    const { delivery, claimed, held } = run;
    let out: unknown;
    try {
      out = this.handle(delivery, held.claim ?? claimed.claim, undefined, held);
    } catch (error) {
      return this.#failedAttempt(run, attempt, error);
    }
    if (!isThenable(out)) return this.#ran(run, out);
    return Promise.resolve(out).then(
      (value) => this.#ran(run, value),
      (error: unknown) => this.#failedAttempt(run, attempt, error),
    );
  }

  #failedAttempt(run: HeldRunState<T>, attempt: number, error: unknown): HeldRun | Promise<HeldRun> {
    const { delivery, claimed, held, started } = run;
    if (!(error instanceof PermanentError || attempt >= this.config.retry.immediate || held.lost))
      return this.#attempt(run, attempt + 1);
    this.config.leases.release(held);
    const claim = held.claim ?? claimed.claim;
    return { settled: this.#fail(delivery, claim, error, started, held.lostError) };
  }

  #ran({ delivery, claimed, held, started }: HeldRunState<T>, value: unknown): HeldRun {
    this.config.leases.release(held);
    return { settled: this.#complete(delivery, claimed, held.claim ?? claimed.claim, value, started) };
  }

  #complete(
    delivery: Readable<T>,
    claimed: WonClaim,
    claim: Claim,
    value: unknown,
    started: number,
  ): Promise<Outcome> {
    let stored: string | null = null;
    try {
      stored = this.store(value);
    } catch (error) {
      // The effect has happened: record it done without a result to replay, rather than run it again.
      this.config.logger.warn('oncemq: the result cannot be stored; duplicates get no result', {
        group: this.config.group,
        key: delivery.key,
        error: errorText(error),
      });
    }
    return this.#completeWithResult(delivery, claim, stored).then(
      () => {
        try {
          delivery.trace.committed();
        } catch (error) {
          return this.unavailable(delivery, error, started);
        }
        return this.executed(delivery, claimed, started, value);
      },
      (error: unknown) => {
        if (!(error instanceof LeaseLostError)) return this.unavailable(delivery, error, started);
        this.config.logger.warn(
          'oncemq: lease lost before completion; another owner may apply the effect again',
          { group: this.config.group, key: delivery.key, attempt: claim.attempt },
        );
        return this.executed(delivery, claimed, started, value, true);
      },
    );
  }

  /**
   * Completes a leased claim with its stored result; a result the ledger refuses to store (past its
   * size limit) is left out — the effect has happened, so the claim is completed without it.
   */
  #completeWithResult(delivery: Readable<T>, claim: Claim, stored: string | null): Promise<void> {
    const completing = this.config.ledger.complete(claim, stored);
    if (stored === null) return completing;
    return completing.catch((error: unknown) => {
      if (!(error instanceof PermanentError)) throw error;
      this.config.logger.warn('oncemq: the ledger cannot store the result; duplicates get no result', {
        group: this.config.group,
        key: delivery.key,
        error: errorText(error),
      });
      return this.config.ledger.complete(claim, null);
    });
  }

  /**
   * Records a failed leased run. When the lease was lost meanwhile (another owner has the key, or no
   * renewal landed: the ledger is away) the retry is not charged to the message.
   */
  async #fail(
    delivery: Readable<T>,
    claim: Claim,
    failure: unknown,
    started: number,
    lost?: LeaseLostError,
  ): Promise<Outcome> {
    const { ledger, onFailure } = this.config;
    try {
      if (onFailure === 'release') await ledger.release(claim);
      else await ledger.fail(claim, errorText(failure));
    } catch (error) {
      this.config.logger.warn('oncemq: could not record a failed attempt', {
        group: this.config.group,
        key: delivery.key,
        error: errorText(error),
      });
    }
    if (lost !== undefined && !(failure instanceof PermanentError))
      return this.unavailable(delivery, lost, started);
    return this.config.outcomes.failed(delivery.envelope, delivery.key, failure, started);
  }
}
