/** How many lines of one kind a {@link LogRateLimit} lets through, and per how long. */
export interface LogRateLimitConfig {
  /** Lines of one kind written per interval; the rest of that interval's lines of the kind are counted, not written. */
  readonly lines: number;
  /** The interval in milliseconds; it starts with the first line of the kind written after the last one ended. */
  readonly intervalMs: number;
  /** Milliseconds now (`Date.now`, or a test's fake clock). */
  readonly clock: () => number;
}

/** Kinds a limiter keeps at most; past it, the kinds whose interval has ended are forgotten. */
export const MAX_LOG_KINDS = 1000;

interface KindWindow {
  /** When this kind's interval started. */
  startedAt: number;
  /** Lines of it written in the interval. */
  written: number;
  /** Lines of it held back since the last one written. */
  suppressed: number;
}

/**
 * A fixed-window limit per kind of line (a logger uses the level and the message): the first
 * `lines` lines of a kind in an interval pass, later ones in the same interval are counted. The first
 * line of the kind after the interval passes again, starting a new interval, and carries the count of
 * the lines held back since the last one written: a flood shows as a few lines and a count, never
 * as silence. A kind that never comes back keeps its count: there is no timer.
 */
export class LogRateLimit {
  readonly #config: LogRateLimitConfig;
  readonly #kinds = new Map<string, KindWindow>();

  constructor(config: LogRateLimitConfig) {
    this.#config = config;
  }

  /** How many kinds it keeps a count for. */
  get kinds(): number {
    return this.#kinds.size;
  }

  /**
   * Whether a line of `kind` is written now: `undefined` when it is held back, else how many lines
   * of the kind were held back before it (0 when none).
   */
  admit(kind: string): number | undefined {
    const { lines, intervalMs, clock } = this.#config;
    const now = clock();
    let window = this.#kinds.get(kind);
    if (window === undefined) {
      if (this.#kinds.size >= MAX_LOG_KINDS) this.#forget(now);
      window = { startedAt: now, written: 0, suppressed: 0 };
      this.#kinds.set(kind, window);
    } else if (now - window.startedAt >= intervalMs) {
      window.startedAt = now;
      window.written = 0;
    }
    if (window.written >= lines) {
      window.suppressed++;
      return undefined;
    }
    window.written++;
    const suppressed = window.suppressed;
    window.suppressed = 0;
    return suppressed;
  }

  /** Drops the kinds whose interval ended with nothing held back; if none, the oldest kind. */
  #forget(now: number): void {
    for (const [kind, window] of this.#kinds) {
      if (window.suppressed === 0 && now - window.startedAt >= this.#config.intervalMs)
        this.#kinds.delete(kind);
    }
    if (this.#kinds.size >= MAX_LOG_KINDS) {
      const oldest = this.#kinds.keys().next();
      if (oldest.done !== true) this.#kinds.delete(oldest.value);
    }
  }
}
