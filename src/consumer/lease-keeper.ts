import { errorText, LeaseLostError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Claim, Ledger } from '../ledger/ledger.js';

/** Where a handler's `ctx.signal` comes from. */
export interface SignalSource {
  readonly signal: AbortSignal;
}

/** Transactional handlers have no lease to lose: one signal that never aborts serves them all. */
export const NEVER_ABORTED: SignalSource = Object.freeze({ signal: new AbortController().signal });

/** The lease of one running leased handler. Its signal is made only if the handler reads it. */
export class HeldLease implements SignalSource {
  claim: Claim;
  renewedAt: number;
  renewing = false;
  #lost: LeaseLostError | undefined;
  #controller: AbortController | undefined;

  constructor(claim: Claim, now: number) {
    this.claim = claim;
    this.renewedAt = now;
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

  lose(error: LeaseLostError): void {
    this.#lost = error;
    this.#controller?.abort(error);
  }
}

/**
 * Renews the leases of a pipeline's running leased handlers from one timer, instead of one timer
 * per message: a lease is renewed once `renewEveryMs` has passed since its last renewal. A handler
 * that finishes sooner never costs a renewal. A lost lease aborts the handler's signal.
 */
export class LeaseKeeper {
  readonly #held = new Set<HeldLease>();
  readonly #tickMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly ledger: Ledger,
    private readonly leaseMs: number,
    private readonly renewEveryMs: number,
    private readonly logger: Logger,
  ) {
    // Renewal happens between renewEvery and renewEvery + tick after the last one: keep that inside the lease.
    this.#tickMs = Math.max(5, Math.floor(Math.min(renewEveryMs, leaseMs - renewEveryMs) / 2));
  }

  hold(claim: Claim): HeldLease {
    const held = new HeldLease(claim, Date.now());
    this.#held.add(held);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => {
        this.#tick();
      }, this.#tickMs);
      this.#timer.unref();
    }
    return held;
  }

  release(held: HeldLease): void {
    this.#held.delete(held);
  }

  #tick(): void {
    if (this.#held.size === 0 && this.#timer !== undefined) {
      // Stopped here rather than in release(): a busy pipeline at concurrency 1 would otherwise make
      // and clear a timer for every message.
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const now = Date.now();
    for (const held of this.#held) {
      if (held.renewing || held.lost || now - held.renewedAt < this.renewEveryMs) continue;
      held.renewing = true;
      this.ledger.renew(held.claim, this.leaseMs).then(
        (renewed) => {
          held.claim = renewed;
          held.renewedAt = Date.now();
          held.renewing = false;
        },
        (error: unknown) => {
          held.renewing = false;
          if (error instanceof LeaseLostError) {
            held.lose(error);
          } else {
            this.logger.warn('oncemq: lease renewal failed', {
              group: held.claim.group,
              key: held.claim.key,
              error: errorText(error),
            });
          }
        },
      );
    }
  }
}
