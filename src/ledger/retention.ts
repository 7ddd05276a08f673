import { checkRetention, DEFAULT_REPLAY_MARGIN, RetryPolicy } from '../core/retry-policy.js';
import { parseDuration, type Duration } from '../core/duration.js';
import { ConfigError, errorText } from '../core/errors.js';
import { toLogger, type LoggerLike } from '../core/logger.js';
import type { Ledger } from './ledger.js';

/** Input of {@link startRetention}: how often and how much of a ledger's finished rows to delete. */
export interface RetentionConfig {
  /** Time between the end of one run and the start of the next. @default '1m' */
  readonly every?: Duration;
  /**
   * Finished rows (SUCCESS, FAIL) not updated for this long are deleted. Refused when shorter than
   * the redelivery horizon of `retry` plus `replayMargin`. @default the ledger's `retentionMs`
   */
  readonly olderThan?: Duration;
  /**
   * Rows per purge batch, each deleted in its own short transaction; the MySQL ledger reads a batch's
   * keys at once and deletes them in statements of at most 1,000 rows in key order, so a large batch
   * (100,000) is cheaper per row there. @default 1000
   */
  readonly batchSize?: number;
  /** Most batches per run; the rest waits for the next run. @default unlimited */
  readonly maxBatchesPerRun?: number;
  /** The retry policy of the consumers of this ledger, whose horizon the retention must outlast. @default RetryPolicy.rocketmq() */
  readonly retry?: RetryPolicy;
  /** Added to the retry horizon (broker retention, dead-letter replays). @default '1d' */
  readonly replayMargin?: Duration;
  /** Called after every batch and at the end of every run; a throw is logged and changes nothing. @default none */
  readonly onProgress?: (progress: RetentionProgress) => void;
  /**
   * Where runs and failures are logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
  /** Clock in epoch milliseconds; the cut-off is `clock() - olderThan`. @default Date.now */
  readonly clock?: () => number;
}

/** Defaults of the {@link RetentionConfig} fields that have a fixed one. */
export const DEFAULT_RETENTION_CONFIG = Object.freeze({
  /** A minute between the end of one run and the start of the next. */
  every: '1m',
  /** Rows deleted per statement. */
  batchSize: 1000,
  /** Added to the retry horizon when `olderThan` is checked. */
  replayMargin: DEFAULT_REPLAY_MARGIN,
} as const);

/** What `onProgress` hears after every batch and at the end of every run. */
export interface RetentionProgress {
  /** Number of the run, from 1. */
  readonly run: number;
  /** Rows deleted so far in this run. */
  readonly deleted: number;
  /** Batches so far in this run. */
  readonly batches: number;
  /** The run is over (the last report of a run). */
  readonly done: boolean;
  /** Another instance held the maintenance lock, so this run deleted nothing. */
  readonly skipped: boolean;
  /** Rows deleted by every run of this retention. */
  readonly totalDeleted: number;
  /** Why the run stopped early, if it failed. */
  readonly error?: unknown;
}

/** A running retention, as {@link startRetention} returns it. */
export interface Retention {
  /** Runs a pass now (waits for a pass in progress first); resolves with its last progress report. */
  runOnce(): Promise<RetentionProgress>;
  /** Stops the timer and waits for a pass in progress to end after its current batch. Passes run after stop() delete nothing. */
  stop(): Promise<void>;
}

/**
 * Deletes a ledger's finished rows on its own (unref'd) timer, in bounded batches, one instance at a
 * time when the ledger has a maintenance lock (instances that find it taken skip the run).
 */
export function startRetention(ledger: Ledger, config: RetentionConfig = {}): Retention {
  if (!ledger.capabilities.purge) {
    throw new ConfigError(
      'ledger',
      `the ${ledger.name} ledger purges nothing (capabilities.purge is false): its finished rows expire on their own`,
    );
  }
  const everyMs = parseDuration(config.every ?? DEFAULT_RETENTION_CONFIG.every, 'every');
  if (everyMs < 1) throw new ConfigError('every', 'must be at least 1ms');
  const olderThanMs =
    config.olderThan === undefined ? ledger.retentionMs : parseDuration(config.olderThan, 'olderThan');
  const batchSize = config.batchSize ?? DEFAULT_RETENTION_CONFIG.batchSize;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new ConfigError('batchSize', `must be a positive integer, got ${batchSize}`);
  }
  const maxBatches = config.maxBatchesPerRun ?? Number.POSITIVE_INFINITY;
  if (!(maxBatches >= 1)) throw new ConfigError('maxBatchesPerRun', 'must be at least 1');
  checkRetention({
    retentionMs: olderThanMs,
    policy: config.retry ?? RetryPolicy.rocketmq(),
    replayMarginMs: parseDuration(
      config.replayMargin ?? DEFAULT_RETENTION_CONFIG.replayMargin,
      'replayMargin',
    ),
    what: `retention of ledger '${ledger.name}'`,
  });
  const clock = config.clock ?? Date.now;
  const logger = toLogger(config.logger);
  let stopped = false;
  let runs = 0;
  let totalDeleted = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let current: Promise<RetentionProgress> | undefined;

  const report = (progress: RetentionProgress): RetentionProgress => {
    try {
      config.onProgress?.(progress);
    } catch (error) {
      logger.error('oncemq: retention onProgress listener threw', { error: errorText(error) });
    }
    return progress;
  };

  const pass = async (): Promise<RetentionProgress> => {
    const run = ++runs;
    let deleted = 0;
    let batches = 0;
    let lock;
    try {
      lock = ledger.capabilities.maintenanceLock
        ? await ledger.tryMaintenanceLock()
        : { release: () => Promise.resolve() };
    } catch (error) {
      logger.warn('oncemq: retention could not take the maintenance lock', { error: errorText(error) });
      return report({ run, deleted, batches, done: true, skipped: true, totalDeleted, error });
    }
    if (lock === undefined) return report({ run, deleted, batches, done: true, skipped: true, totalDeleted });
    try {
      const olderThan = new Date(clock() - olderThanMs);
      while (!stopped && batches < maxBatches) {
        const result = await ledger.purge({ olderThan, batchSize, maxBatches: 1 });
        batches += result.batches;
        deleted += result.deleted;
        totalDeleted += result.deleted;
        if (result.deleted < batchSize) break;
        report({ run, deleted, batches, done: false, skipped: false, totalDeleted });
      }
      logger.info('oncemq: retention pass done', { ledger: ledger.name, deleted, batches });
      return report({ run, deleted, batches, done: true, skipped: false, totalDeleted });
    } catch (error) {
      logger.warn('oncemq: retention pass failed', { ledger: ledger.name, error: errorText(error) });
      return report({ run, deleted, batches, done: true, skipped: false, totalDeleted, error });
    } finally {
      await lock.release().catch((error: unknown) => {
        logger.warn('oncemq: retention could not release the maintenance lock', { error: errorText(error) });
      });
    }
  };

  const runOnce = async (): Promise<RetentionProgress> => {
    while (current !== undefined) await current;
    current = pass().finally(() => {
      current = undefined;
    });
    return current;
  };

  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      void runOnce().finally(schedule);
    }, everyMs);
    timer.unref();
  };
  schedule();

  return {
    runOnce,
    async stop(): Promise<void> {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      if (current !== undefined) await current;
    },
  };
}
