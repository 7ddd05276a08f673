/**
 * Stops calling a dependency that just failed, and tries it again after a pause.
 * Closed: every call goes through. A failure opens it for `retryAfterMs`; after that one probe call
 * goes through (half-open): its success closes the breaker, its failure opens it again.
 */
export class CircuitBreaker {
  readonly retryAfterMs: number;
  readonly #clock: () => number;
  #open = false;
  #openUntil = 0;
  #probing = false;
  #opened = 0;

  constructor(retryAfterMs: number, clock: () => number = Date.now) {
    this.retryAfterMs = retryAfterMs;
    this.#clock = clock;
  }

  /** Whether a call may go through now; while half-open, only the first caller gets `true`. */
  allows(): boolean {
    if (!this.#open) return true;
    if (this.#probing || this.#clock() < this.#openUntil) return false;
    this.#probing = true;
    return true;
  }

  success(): void {
    this.#open = false;
    this.#probing = false;
  }

  failure(): void {
    if (!this.#open) this.#opened++;
    this.#open = true;
    this.#probing = false;
    this.#openUntil = this.#clock() + this.retryAfterMs;
  }

  get isOpen(): boolean {
    return this.#open;
  }

  /** How many times the breaker went from closed to open. */
  get timesOpened(): number {
    return this.#opened;
  }
}
