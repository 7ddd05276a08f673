import type { DeliveryKeepAlive } from '../core/envelope.js';
import { errorText, LeaseLostError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Claim, Ledger } from '../ledger/ledger.js';

/** Where a handler's `ctx.signal` comes from. */
export interface SignalSource {
  readonly signal: AbortSignal;
}

/** Transactional handlers have no lease to lose: one signal that never aborts serves them all. */
export const NEVER_ABORTED: SignalSource = Object.freeze({ signal: new AbortController().signal });

/**
 * One delivery whose handler runs: its ledger lease (leased mode) and its keep-alive at the broker
 * (where the transport gives one). Its signal is made only if the handler reads it.
 */
export class HeldDelivery implements SignalSource {
  /** The leased claim, renewed in place; `undefined` for a transactional delivery. */
  claim: Claim | undefined;
  /**
   * Local end of the lease: when the last successful claim or renewal was sent, plus the lease. The
   * ledger's own lease ends no earlier, so a rival can take the key only after this instant.
   */
  leaseDeadline: number;
  /**
   * When the next renewal is sent: `renewEvery` after the last successful one was *sent* (so the time
   * it took to land does not push the next one later), or a short backoff after a failed one.
   */
  renewAt: number;
  renewing = false;
  /** Renewals failed in a row (not counting a lost lease). */
  failures = 0;
  readonly keepAlive: DeliveryKeepAlive | undefined;
  extendedAt: number;
  extending = false;
  #lost: LeaseLostError | undefined;
  #controller: AbortController | undefined;

  constructor(
    claim: Claim | undefined,
    sentAt: number,
    leaseMs: number,
    renewEveryMs: number,
    keepAlive: DeliveryKeepAlive | undefined,
  ) {
    this.claim = claim;
    this.leaseDeadline = sentAt + leaseMs;
    this.renewAt = sentAt + renewEveryMs;
    this.keepAlive = keepAlive;
    this.extendedAt = Date.now();
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#lost !== undefined) this.#controller.abort(this.#lost);
    }
    return this.#controller.signal;
  }

  get lost(): boolean {
    return this.#lost !== undefined;
  }

  /** The error the lease was lost with, if it was. */
  get lostError(): LeaseLostError | undefined {
    return this.#lost;
  }

  lose(error: LeaseLostError): void {
    if (this.#lost !== undefined) return;
    this.#lost = error;
    this.#controller?.abort(error);
  }
}

/**
 * First wait before a failed renewal is sent again; it doubles with each failure in a row, up to a
 * quarter of `renewEvery`, so several retries fit before the lease is given up.
 */
export const RENEW_RETRY_MS = 10;

/**
 * How long before the local end of a lease the keeper gives it up when no renewal has landed: a
 * quarter of the time a renewal has to land (`lease - renewEvery`), at least 1 ms. It covers a timer
 * that fires late on a busy event loop, so the signal aborts before any rival can take the key.
 */
export function leaseGuardMs(leaseMs: number, renewEveryMs: number): number {
  return Math.max(1, Math.floor((leaseMs - renewEveryMs) / 4));
}

/**
 * Renews the leases of a pipeline's running leased handlers, and keeps their deliveries alive at
 * the broker, from one timer instead of one per message; the timer is set for the earliest thing due.
 * A lease is renewed `renewEvery` after its last renewal was *sent*; one that fails is sent again
 * after a short backoff ({@link RENEW_RETRY_MS}, doubling up to `renewEvery / 4`), and one that came
 * back later than `renewEvery` is followed by the next at once. A delivery is extended once its
 * keep-alive period has passed. A handler that finishes sooner never costs either. A lease that is lost — the ledger says another
 * owner has the key, or no renewal landed by {@link leaseGuardMs} before the lease would end — aborts
 * the handler's signal before any rival can take the key.
 */
export class LeaseKeeper {
  readonly #held = new Set<HeldDelivery>();
  readonly #guardMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the timer fires. */
  #timerAt = Infinity;

  constructor(
    private readonly ledger: Ledger,
    private readonly leaseMs: number,
    private readonly renewEveryMs: number,
    private readonly logger: Logger,
  ) {
    this.#guardMs = leaseGuardMs(leaseMs, renewEveryMs);
  }

  /**
   * Starts keeping a delivery: its leased claim (sent at `sentAt`, by the local clock) and its
   * broker keep-alive, either of which may be absent.
   */
  hold(claim: Claim | undefined, sentAt: number, keepAlive?: DeliveryKeepAlive): HeldDelivery {
    const held = new HeldDelivery(claim, sentAt, this.leaseMs, this.renewEveryMs, keepAlive);
    this.#held.add(held);
    this.#schedule();
    return held;
  }

  release(held: HeldDelivery): void {
    // The timer is left as it is: when it fires with nothing due it is not set again, so a busy
    // pipeline at concurrency 1 does not make and clear a timer for every message.
    this.#held.delete(held);
  }

  /** When `held` next needs the keeper: a renewal, giving up its lease, or a keep-alive. */
  #dueAt(held: HeldDelivery): number {
    let due = Infinity;
    if (held.claim !== undefined && !held.lost) {
      due = held.leaseDeadline - this.#guardMs;
      if (!held.renewing) due = Math.min(due, held.renewAt);
    }
    if (held.keepAlive !== undefined && !held.extending) {
      due = Math.min(due, held.extendedAt + held.keepAlive.everyMs);
    }
    return due;
  }

  /** Sets the one timer for the earliest instant any held delivery is due, unless it fires sooner. */
  #schedule(): void {
    let next = Infinity;
    for (const held of this.#held) next = Math.min(next, this.#dueAt(held));
    if (next === Infinity || (this.#timer !== undefined && this.#timerAt <= next)) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAt = next;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerAt = Infinity;
        this.#tick();
      },
      Math.max(0, next - Date.now()),
    );
    this.#timer.unref();
  }

  #tick(): void {
    const now = Date.now();
    for (const held of this.#held) {
      if (held.claim !== undefined && !held.lost) this.#keepLease(held, held.claim, now);
      if (held.keepAlive !== undefined) this.#extend(held, held.keepAlive, now);
    }
    this.#schedule();
  }

  #keepLease(held: HeldDelivery, claim: Claim, now: number): void {
    if (now >= held.leaseDeadline - this.#guardMs) {
      // No renewal landed in time: a rival may soon reclaim the key. Stop the handler now, even if a
      // renewal is still on its way: the ledger may not have it yet.
      this.#lose(
        held,
        new LeaseLostError(claim.group, claim.key, claim.attempt, {
          cause: new Error(
            `no lease renewal landed in time: the lease (${this.leaseMs}ms) would end in ${held.leaseDeadline - now}ms`,
          ),
        }),
      );
      return;
    }
    if (held.renewing || now < held.renewAt) return;
    held.renewing = true;
    const sentAt = Date.now();
    this.ledger.renew(claim, this.leaseMs).then(
      (renewed) => {
        held.renewing = false;
        held.failures = 0;
        if (held.lost) return;
        held.claim = renewed;
        held.leaseDeadline = sentAt + this.leaseMs;
        held.renewAt = sentAt + this.renewEveryMs;
        const tookMs = Date.now() - sentAt;
        if (tookMs >= this.renewEveryMs) {
          this.logger.debug('oncemq: a lease renewal landed late; renewing again at once', {
            group: claim.group,
            key: claim.key,
            tookMs,
          });
        }
        this.#schedule();
      },
      (error: unknown) => {
        held.renewing = false;
        if (error instanceof LeaseLostError) {
          this.#lose(held, error);
          return;
        }
        held.failures++;
        held.renewAt = Date.now() + this.#retryDelayMs(held.failures);
        this.logger.warn('oncemq: lease renewal failed; retrying until the lease would end', {
          group: claim.group,
          key: claim.key,
          error: errorText(error),
        });
        this.#schedule();
      },
    );
  }

  /** Gives up the lease of `held` (its handler's signal aborts), saying so once. */
  #lose(held: HeldDelivery, error: LeaseLostError): void {
    if (held.lost) return;
    held.lose(error);
    this.logger.warn("oncemq: lease lost; the handler's signal is aborted", {
      group: error.group,
      key: error.key,
      attempt: error.attempt,
      error: errorText(error.cause ?? error),
    });
  }

  /** Wait before sending a failed renewal again: {@link RENEW_RETRY_MS}, doubling, at most a quarter of `renewEvery`. */
  #retryDelayMs(failures: number): number {
    return Math.min(Math.max(RENEW_RETRY_MS, this.renewEveryMs / 4), RENEW_RETRY_MS * 2 ** (failures - 1));
  }

  #extend(held: HeldDelivery, keepAlive: DeliveryKeepAlive, now: number): void {
    if (held.extending || now - held.extendedAt < keepAlive.everyMs) return;
    held.extending = true;
    let extension: Promise<void>;
    try {
      extension = keepAlive.extend();
    } catch (error) {
      extension = Promise.reject(error instanceof Error ? error : new Error(errorText(error)));
    }
    const settled = (): void => {
      held.extending = false;
      held.extendedAt = Date.now();
      this.#schedule();
    };
    extension.then(settled, (error: unknown) => {
      settled();
      this.logger.warn('oncemq: could not keep the delivery at the broker; it may come again', {
        key: held.claim?.key,
        error: errorText(error),
      });
    });
  }
}

/**
 * Keeps the deliveries' broker keep-alives running while transactional work runs, until the function
 * returned is called; undefined when none has one (nothing is allocated for deliveries without).
 */
export function keepAlive(
  leases: LeaseKeeper,
  deliveries: readonly { readonly envelope: { readonly keepAlive?: DeliveryKeepAlive | undefined } }[],
): (() => void) | undefined {
  let held: HeldDelivery[] | undefined;
  for (const { envelope } of deliveries) {
    if (envelope.keepAlive !== undefined)
      (held ??= []).push(leases.hold(undefined, Date.now(), envelope.keepAlive));
  }
  if (held === undefined) return undefined;
  const all = held;
  return () => {
    for (const one of all) leases.release(one);
  };
}
