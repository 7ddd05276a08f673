import type { PipelineMetrics } from '../../consumer/metrics.js';
import { errorText } from '../../core/errors.js';
import type { Ledger } from '../../ledger/ledger.js';
import type { DeadLetters } from '../../transport/dead-letters.js';

/** Something the dashboard opens on first use, and again after a failed opening (a table migrated since). */
export interface Opener<T> {
  /** Where it is, for the page (passwords redacted). */
  readonly location: string;
  open(): Promise<T>;
  close(): Promise<void>;
}

/** Where the outcome counters come from. */
export interface MetricsSource {
  /** `process` (the consumer runs in this process: `oncemq demo --dashboard`) or `prometheus` (a scrape URL). */
  readonly kind: 'process' | 'prometheus';
  readonly location: string;
  /** Totals since the consumer started; the page turns two readings into rates. */
  read(): Promise<PipelineMetrics>;
  close?(): Promise<void>;
}

/** What one dashboard shows: each part is optional, and a missing part says how to add it. */
export interface DashboardSources {
  /** The ledger whose stuck and failed claims are listed (opened read-only: `migrate: false`). */
  readonly ledger?: Opener<Ledger>;
  /** The dead-letter queue of a transport with the `deadLetter` capability. */
  readonly deadLetters?: Opener<DeadLetters> & { readonly transport: string };
  /** The consumer groups whose dead letters are shown. */
  readonly groups: readonly string[];
  readonly metrics?: MetricsSource;
}

/**
 * Opens `open()` once it succeeds; a failed opening is tried again on the next use, so a ledger
 * table migrated or a broker started after the dashboard shows up without a restart.
 */
export function lazyOpener<T>(
  location: string,
  open: () => Promise<T>,
  close: (value: T) => Promise<void>,
): Opener<T> {
  let opened: Promise<T> | undefined;
  return {
    location,
    open() {
      opened ??= open().catch((error: unknown) => {
        opened = undefined;
        throw error;
      });
      return opened;
    },
    async close() {
      const value = await opened?.catch(() => undefined);
      opened = undefined;
      if (value !== undefined) await close(value);
    },
  };
}

/** A part of the page's state: its value, or the error that kept it from being read. */
export type Part<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/** Runs `read`, turning an error into the text the page shows in place of the part. */
export async function part<T>(read: () => Promise<T>): Promise<Part<T>> {
  try {
    return { ok: true, value: await read() };
  } catch (error) {
    return { ok: false, error: errorText(error) };
  }
}
