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
  renewedAt: number;
  renewing = false;
  readonly keepAlive: DeliveryKeepAlive | undefined;
  extendedAt: number;
  extending = false;
  #lost: LeaseLostError | undefined;
  #controller: AbortController | undefined;

  constructor(
    claim: Claim | undefined,
    sentAt: number,
    leaseMs: number,
    keepAlive: DeliveryKeepAlive | undefined,
  ) {
    this.claim = claim;
    this.leaseDeadline = sentAt + leaseMs;
    this.renewedAt = sentAt;
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

/** Shortest timer period of a keeper. */
const MIN_TICK_MS = 5;

/**
 * Renews the leases of a pipeline's running leased handlers, and keeps their deliveries alive at
 * the broker, from one timer instead of one per message: a lease is renewed once `renewEveryMs`
 * has passed since its last renewal, a delivery extended once its keep-alive period has passed. A
 * handler that finishes sooner never costs either. A lease that is lost — the ledger says another
 * owner has the key, or no renewal landed before the lease would end — aborts the handler's signal
 * before any rival can take the key.
 */
export class LeaseKeeper {
  readonly #held = new Set<HeldDelivery>();
  readonly #leaseTickMs: number;
  #tickMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly ledger: Ledger,
    private readonly leaseMs: number,
    private readonly renewEveryMs: number,
    private readonly logger: Logger,
  ) {
    // A renewal starts between renewEvery and renewEvery + tick after the last one, and a lost lease
    // is noticed at most a tick late: keep both inside the lease.
    this.#leaseTickMs = Math.max(MIN_TICK_MS, Math.floor(Math.min(renewEveryMs, leaseMs - renewEveryMs) / 2));
    this.#tickMs = this.#leaseTickMs;
  }

  /**
   * Starts keeping a delivery: its leased claim (sent at `sentAt`, by the local clock) and its
   * broker keep-alive, either of which may be absent.
   */
  hold(claim: Claim | undefined, sentAt: number, keepAlive?: DeliveryKeepAlive): HeldDelivery {
    const held = new HeldDelivery(claim, sentAt, this.leaseMs, keepAlive);
    this.#held.add(held);
    const wanted =
      keepAlive === undefined
        ? this.#tickMs
        : Math.max(MIN_TICK_MS, Math.min(this.#tickMs, Math.floor(keepAlive.everyMs / 2)));
    if (this.#timer === undefined || wanted < this.#tickMs) this.#start(wanted);
    return held;
  }

  release(held: HeldDelivery): void {
    this.#held.delete(held);
  }

  #start(tickMs: number): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#tickMs = tickMs;
    this.#timer = setInterval(() => {
      this.#tick();
    }, tickMs);
    this.#timer.unref();
  }

  #tick(): void {
    if (this.#held.size === 0 && this.#timer !== undefined) {
      // Stopped here rather than in release(): a busy pipeline at concurrency 1 would otherwise make
      // and clear a timer for every message.
      clearInterval(this.#timer);
      this.#timer = undefined;
      this.#tickMs = this.#leaseTickMs;
      return;
    }
    const now = Date.now();
    for (const held of this.#held) {
      if (held.claim !== undefined && !held.lost) this.#keepLease(held, held.claim, now);
      if (held.keepAlive !== undefined) this.#extend(held, held.keepAlive, now);
    }
  }

  #keepLease(held: HeldDelivery, claim: Claim, now: number): void {
    if (now >= held.leaseDeadline - this.#tickMs) {
      // No renewal landed in time: by the next tick a rival could reclaim the key. Stop the handler now.
      held.lose(
        new LeaseLostError(claim.group, claim.key, claim.attempt, {
          cause: new Error(`no lease renewal succeeded within the lease (${this.leaseMs}ms)`),
        }),
      );
      return;
    }
    if (held.renewing || now - held.renewedAt < this.renewEveryMs) return;
    held.renewing = true;
    const sentAt = Date.now();
    this.ledger.renew(claim, this.leaseMs).then(
      (renewed) => {
        held.renewing = false;
        if (held.lost) return;
        held.claim = renewed;
        held.renewedAt = Date.now();
        held.leaseDeadline = sentAt + this.leaseMs;
      },
      (error: unknown) => {
        held.renewing = false;
        if (error instanceof LeaseLostError) {
          held.lose(error);
        } else {
          this.logger.warn('oncemq: lease renewal failed; retrying until the lease would end', {
            group: claim.group,
            key: claim.key,
            error: errorText(error),
          });
        }
      },
    );
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
    extension.then(
      () => {
        held.extending = false;
        held.extendedAt = Date.now();
      },
      (error: unknown) => {
        held.extending = false;
        held.extendedAt = Date.now();
        this.logger.warn('oncemq: could not keep the delivery at the broker; it may come again', {
          key: held.claim?.key,
          error: errorText(error),
        });
      },
    );
  }
}
