import { parseDuration, type Duration } from '../core/duration.js';
import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { FingerprintSource } from '../core/fingerprint.js';
import { validateGroup } from '../core/group.js';
import { compileKeySource, DEFAULT_KEY_SOURCE, type KeyExtractor, type KeySource } from '../core/key.js';
import { toLogger, type LoggerLike, type Logger } from '../core/logger.js';
import type { Outcome } from '../core/outcome.js';
import { JSON_SERIALIZER, type Serializer } from '../core/serializer.js';
import type { Ledger } from '../ledger/ledger.js';
import { validateTelemetry, type TelemetryConfig } from '../telemetry/pipeline-telemetry.js';
import { compileDecoder, type Decoder } from './delivery-reader.js';
import { batchResults, type BatchHandler, type Handler } from './handler.js';
import { isThenable } from '../core/thenable.js';
import type { Mode } from './handler-context.js';
import type { Outbox } from '../outbox/outbox.js';
import {
  checkRetention,
  DEFAULT_REPLAY_MARGIN,
  RetryPolicy,
  type RetryPolicyConfig,
} from '../core/retry-policy.js';

/**
 * Input of `createPipeline(config)`: where claims are recorded, the group, the handler, and how keys,
 * retries and leases work. Checked at `createPipeline`: a bad value throws a {@link ConfigError} there,
 * never at the first delivery. `Tx` is the ledger's transaction type (what `ctx.tx` is), `T` the
 * decoded message.
 */
export interface PipelineConfig<Tx, T = unknown> {
  /**
   * Where `(group, key)` claims are recorded: a SQL ledger in your business database (so the claim and
   * the effect share a transaction), a Redis ledger (leased mode only) or a tiered one. The pipeline
   * initializes it; closing it stays yours.
   */
  readonly ledger: Ledger<Tx>;
  /** The consumer group: the same event is applied once per group. */
  readonly group: string;
  /** Applies one message's effect. Optional when `batchHandler` is given (it then gets one event at a time). */
  readonly handler?: Handler<Tx, T>;
  /**
   * Transactional mode: applies the won events of a batch (`processBatch`) at once inside the claim's
   * transaction, so a batch costs one business statement instead of one per event. A throw rolls the
   * batch back and every delivery is processed on its own (through `handler`, or this with one event).
   * Only the events whose claim was won reach it: duplicates, busy keys and conflicts are answered
   * without it. Refused in leased mode. See {@link BatchHandler} for what it returns, and
   * docs/pipeline.md for an example. @default none (`handler` runs once per event)
   */
  readonly batchHandler?: BatchHandler<Tx, T>;
  /** Where the business key comes from. @default { header: 'oncemq-key' } */
  readonly key?: KeySource;
  /**
   * How a claim and the effect relate: `transactional` (one local transaction, exactly-once database
   * effect) or `leased` (effects outside the database, at-least-once to the downstream).
   * @default 'transactional' when the ledger can share a transaction, else 'leased'
   */
  readonly mode?: Mode;
  /** How the body becomes the handler's message: `json`, `text`, `bytes` or a function. @default 'json' */
  readonly decode?: Decoder<T>;
  /** Payload fingerprint for conflict detection. @default true (SHA-256 of the body) */
  readonly fingerprint?: FingerprintSource;
  /** What follows a failed handler: immediate retries, delayed retries, then the dead-letter queue. @default RetryPolicy.rocketmq() */
  readonly retry?: RetryPolicy | RetryPolicyConfig;
  /** Added to the retry horizon when checking the ledger's retention (broker retention, replays). @default '1d' */
  readonly replayMargin?: Duration;
  /** Lease of a leased claim; a crashed owner's key is reclaimable after it. @default '30s' */
  readonly lease?: Duration;
  /**
   * How often a running handler's lease is renewed: at most a third of the lease. The lease keeper
   * gives a lease up (aborting `ctx.signal`) a quarter of `lease - renewEvery` before it ends, so a
   * renewal and its retries have `(lease - renewEvery) * 3/4` to land: half the lease at a third,
   * room for a renewal delayed by contended writes (`npm run bench -- leases`, docs/pipeline.md).
   * @default a third of the lease
   */
  readonly renewEvery?: Duration;
  /** Leased mode, after a failed execution: keep the row as FAIL with the error, or delete it. @default 'fail' */
  readonly onFailure?: 'fail' | 'release';
  /** Stores handler results in the ledger and reads them back for duplicates. @default JSON */
  readonly serializer?: Serializer;
  /** Called with every outcome, after the ledger has recorded it. */
  readonly onOutcome?: (outcome: Outcome) => void;
  /**
   * Where log lines go: `console`, a pino logger, or any object with warn/error (and optionally
   * info/debug), as they are. Every outcome's line carries group, key, brokerId, attempt and outcome.
   * `SILENT_LOGGER` writes nothing. @default DEFAULT_LOGGER: warnings and errors to stderr, rate-limited
   */
  readonly logger?: LoggerLike;
  /**
   * OpenTelemetry metrics and spans (docs/observability.md), through `@opentelemetry/api` when it is
   * installed (a no-op when it is not); `false` turns them off. @default the global providers
   */
  readonly telemetry?: TelemetryConfig | false;
  /**
   * The transactional outbox of the ledger's database (`createOutbox({ ledger })`): handlers write
   * follow-up messages with `ctx.outbox.add(...)` in the claim's transaction. Transactional mode only.
   * @default none (`ctx.outbox` throws)
   */
  readonly outbox?: Outbox<Tx>;
}

/**
 * The lease is at least this many times `renewEvery` (and `renewEvery` defaults to lease / this). At
 * half the lease, renewals slowed by a rival's writes came back too late to keep it (docs/pipeline.md).
 */
export const MIN_LEASE_PER_RENEWAL = 3;

/** Defaults of the {@link PipelineConfig} fields that have a fixed one. */
export const DEFAULT_PIPELINE_CONFIG = Object.freeze({
  /** Bodies are decoded as UTF-8 JSON; one that does not parse is a `malformed` dead letter. */
  decode: 'json',
  /** A leased claim's lease. */
  lease: '30s',
  /** Leased mode keeps a failed execution's row as FAIL with the error as its remark. */
  onFailure: 'fail',
  /** Added to the retry horizon when the ledger's retention is checked. */
  replayMargin: DEFAULT_REPLAY_MARGIN,
} as const);

/** A pipeline's configuration, checked and with its defaults, frozen. */
export interface ResolvedPipelineConfig<Tx, T> {
  readonly ledger: Ledger<Tx>;
  readonly group: string;
  readonly handler: Handler<Tx, T>;
  readonly batchHandler: BatchHandler<Tx, T> | undefined;
  readonly key: KeyExtractor;
  readonly mode: Mode;
  readonly decode: (envelope: Envelope) => T;
  readonly fingerprint: FingerprintSource;
  readonly retry: RetryPolicy;
  readonly leaseMs: number;
  readonly renewEveryMs: number;
  readonly onFailure: 'fail' | 'release';
  readonly serializer: Serializer;
  readonly onOutcome: ((outcome: Outcome) => void) | undefined;
  readonly logger: Logger;
  readonly outbox: Outbox<Tx> | undefined;
  readonly telemetry: TelemetryConfig | false;
}

function resolveMode(ledger: Ledger, mode: Mode | undefined): Mode {
  const chosen: Mode = mode ?? (ledger.capabilities.transactional ? 'transactional' : 'leased');
  if (!(['transactional', 'leased'] as unknown[]).includes(chosen)) {
    throw new ConfigError('mode', `expected 'transactional' or 'leased', got ${JSON.stringify(chosen)}`);
  }
  if (chosen === 'transactional' && !ledger.capabilities.transactional) {
    throw new ConfigError(
      'mode',
      `ledger '${ledger.name}' cannot share a transaction with the handler; use mode 'leased'`,
    );
  }
  if (chosen === 'leased' && !ledger.capabilities.leased) {
    throw new ConfigError('mode', `ledger '${ledger.name}' has no leased claims; use mode 'transactional'`);
  }
  return chosen;
}

function resolveRetry(retry: RetryPolicy | RetryPolicyConfig | undefined): RetryPolicy {
  if (retry instanceof RetryPolicy) return retry;
  return retry === undefined ? RetryPolicy.rocketmq() : new RetryPolicy(retry);
}

/** A batch handler as a handler of one message: a batch of one event, its one result. */
function oneByOne<Tx, T>(group: string, batchHandler: BatchHandler<Tx, T>): Handler<Tx, T> {
  return (message, context) => {
    const out = batchHandler([{ message, context }], { tx: context.tx, group });
    return isThenable(out)
      ? Promise.resolve(out).then((results) => batchResults(results, 1)[0])
      : batchResults(out, 1)[0];
  };
}

/** An outbox writes in the claim's transaction: it needs transactional mode on the outbox's own database. */
function checkOutbox<Tx>(ledger: Ledger<Tx>, mode: Mode, outbox: Outbox<Tx> | undefined): void {
  if (outbox === undefined) return;
  if (typeof (outbox as Partial<Outbox<Tx>>).add !== 'function') {
    throw new ConfigError('outbox', 'pass createOutbox({ ledger }) from oncemq');
  }
  if (mode !== 'transactional') {
    throw new ConfigError(
      'outbox',
      `ctx.outbox writes in the claim's transaction: it needs mode 'transactional', not '${mode}'`,
    );
  }
  if (ledger.dialect === undefined || ledger.dialect.name !== outbox.dialect.name) {
    throw new ConfigError(
      'outbox',
      `the outbox is on ${outbox.dialect.name} but ledger '${ledger.name}' is not: create it with createOutbox({ ledger })`,
    );
  }
}

/** Checks a pipeline's configuration at start-up: a bad value fails here, never at the first delivery. */
export function resolvePipelineConfig<Tx, T>(config: PipelineConfig<Tx, T>): ResolvedPipelineConfig<Tx, T> {
  const { ledger, batchHandler } = config;
  const group = validateGroup(config.group);
  if (batchHandler !== undefined && typeof batchHandler !== 'function') {
    throw new ConfigError('batchHandler', 'must be a function');
  }
  const handler = config.handler ?? (batchHandler === undefined ? undefined : oneByOne(group, batchHandler));
  if (typeof handler !== 'function')
    throw new ConfigError('handler', 'must be a function (or give a batchHandler)');
  const mode = resolveMode(ledger, config.mode);
  if (batchHandler !== undefined && mode !== 'transactional') {
    throw new ConfigError(
      'batchHandler',
      `runs inside the claim's transaction: it needs mode 'transactional', not '${mode}'`,
    );
  }
  checkOutbox(ledger, mode, config.outbox);
  const retry = resolveRetry(config.retry);
  checkRetention({
    retentionMs: ledger.retentionMs,
    policy: retry,
    replayMarginMs: parseDuration(
      config.replayMargin ?? DEFAULT_PIPELINE_CONFIG.replayMargin,
      'replayMargin',
    ),
    what: `ledger '${ledger.name}'`,
  });
  const leaseMs = parseDuration(config.lease ?? DEFAULT_PIPELINE_CONFIG.lease, 'lease');
  if (leaseMs < 10) throw new ConfigError('lease', `must be at least 10ms, got ${leaseMs}ms`);
  const renewEveryMs = parseDuration(
    config.renewEvery ?? Math.floor(leaseMs / MIN_LEASE_PER_RENEWAL),
    'renewEvery',
  );
  if (renewEveryMs < 1 || renewEveryMs > leaseMs / MIN_LEASE_PER_RENEWAL) {
    const most = Math.floor(leaseMs / MIN_LEASE_PER_RENEWAL);
    throw new ConfigError(
      'renewEvery',
      `must be between 1ms and a third of the lease (${most}ms), got ${renewEveryMs}ms: a renewal must have time to land, and be retried, before the lease ${leaseMs}ms is given up; renew every ${most}ms or lengthen the lease`,
    );
  }
  const onFailure = config.onFailure ?? DEFAULT_PIPELINE_CONFIG.onFailure;
  if (!(['fail', 'release'] as unknown[]).includes(onFailure)) {
    throw new ConfigError('onFailure', `expected 'fail' or 'release', got ${JSON.stringify(onFailure)}`);
  }
  if (config.onOutcome !== undefined && typeof config.onOutcome !== 'function') {
    throw new ConfigError('onOutcome', 'must be a function');
  }
  return Object.freeze({
    ledger,
    group,
    handler,
    batchHandler,
    key: compileKeySource(config.key ?? DEFAULT_KEY_SOURCE),
    mode,
    decode: compileDecoder(config.decode ?? (DEFAULT_PIPELINE_CONFIG.decode as Decoder<T>)),
    fingerprint: config.fingerprint ?? true,
    retry,
    leaseMs,
    renewEveryMs,
    onFailure,
    serializer: config.serializer ?? JSON_SERIALIZER,
    onOutcome: config.onOutcome,
    logger: toLogger(config.logger),
    telemetry: validateTelemetry(config.telemetry),
    outbox: config.outbox,
  });
}
