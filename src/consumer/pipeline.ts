import { parseDuration, type Duration } from '../core/duration.js';
import type { Envelope } from '../core/envelope.js';
import {
  ClosedError,
  ConfigError,
  LeaseLostError,
  LedgerUnavailableError,
  PermanentError,
  errorText,
} from '../core/errors.js';
import { fingerprint, type FingerprintSource } from '../core/fingerprint.js';
import { validateGroup } from '../core/group.js';
import {
  compileKeySource,
  DEFAULT_KEY_SOURCE,
  normalizeKey,
  type KeyExtractor,
  type KeySource,
} from '../core/key.js';
import { SILENT_LOGGER, type Logger } from '../core/logger.js';
import type { Outcome } from '../core/outcome.js';
import { JSON_SERIALIZER, type Serializer } from '../core/serializer.js';
import { isWon, type Claim, type ClaimResult, type Ledger } from '../ledger/ledger.js';
import { isThenable } from '../core/thenable.js';
import { processBatch, type BatchInternals, type ParsedDelivery } from './batch.js';
import { PipelineContext, type HandlerContext, type Mode } from './handler-context.js';
import { LeaseKeeper, NEVER_ABORTED, type HeldLease, type SignalSource } from './lease-keeper.js';
import { OutcomeCounters, type PipelineMetrics } from './metrics.js';
import { OutcomeBuilder } from './outcome-builder.js';
import {
  checkRetention,
  DEFAULT_REPLAY_MARGIN,
  RetryPolicy,
  type RetryPolicyConfig,
} from './retry-policy.js';

/** Applies the business effect of one message. Its return value is stored and replayed to duplicates. */
export type Handler<Tx, T> = (message: T, context: HandlerContext<Tx>) => unknown;

/** How the body becomes the handler's message; a failure is a `malformed` dead letter. */
export type Decoder<T> = 'json' | 'text' | 'bytes' | ((envelope: Envelope) => T);

export interface PipelineConfig<Tx, T = unknown> {
  readonly ledger: Ledger<Tx>;
  /** The consumer group: the same event is applied once per group. */
  readonly group: string;
  readonly handler: Handler<Tx, T>;
  /** Where the business key comes from. @default { header: 'oncemq-key' } */
  readonly key?: KeySource;
  /** @default 'transactional' when the ledger can share a transaction, else 'leased' */
  readonly mode?: Mode;
  /** @default 'json' */
  readonly decode?: Decoder<T>;
  /** Payload fingerprint for conflict detection. @default true (SHA-256 of the body) */
  readonly fingerprint?: FingerprintSource;
  /** @default RetryPolicy.rocketmq() */
  readonly retry?: RetryPolicy | RetryPolicyConfig;
  /** Added to the retry horizon when checking the ledger's retention (broker retention, replays). @default '1d' */
  readonly replayMargin?: Duration;
  /** Lease of a leased claim; a crashed owner's key is reclaimable after it. @default '30s' */
  readonly lease?: Duration;
  /** How often a running handler's lease is renewed. @default a third of the lease */
  readonly renewEvery?: Duration;
  /** Leased mode, after a failed execution: keep the row as FAIL with the error, or delete it. @default 'fail' */
  readonly onFailure?: 'fail' | 'release';
  /** @default JSON */
  readonly serializer?: Serializer;
  /** Called with every outcome, after the ledger has recorded it. */
  readonly onOutcome?: (outcome: Outcome) => void;
  /** @default silent */
  readonly logger?: Logger;
}

export const DEFAULT_PIPELINE_CONFIG = Object.freeze({
  decode: 'json',
  lease: '30s',
  onFailure: 'fail',
  replayMargin: DEFAULT_REPLAY_MARGIN,
} as const);

export interface Pipeline {
  readonly group: string;
  readonly mode: Mode;
  readonly retry: RetryPolicy;
  /** Runs one delivery to its outcome. Never throws for a message's fault; the outcome says what to do. */
  process(envelope: Envelope): Promise<Outcome>;
  /**
   * Runs a batch of deliveries to their outcomes, in order, with process()'s semantics. In
   * transactional mode on a ledger with batch claims the batch shares one claim statement and one
   * commit; a failing handler makes the batch fall back to one transaction per delivery. In leased
   * mode every claim of the batch is made at once and its lease held from then on, the handlers run
   * one after another in delivery order, and the completions are settled as they go (a Redis ledger
   * shares their round trips); a later copy of a key in the same batch is claimed at its turn.
   */
  processBatch(envelopes: readonly Envelope[]): Promise<Outcome[]>;
  metrics(): PipelineMetrics;
  /** Refuses further deliveries. The ledger stays open: it is the caller's. */
  close(): void;
}

const textDecoder = new TextDecoder('utf-8', { fatal: true });

function compileDecoder<T>(decode: Decoder<T>): (envelope: Envelope) => T {
  switch (decode) {
    case 'json':
      return (envelope) => JSON.parse(textDecoder.decode(envelope.body)) as T;
    case 'text':
      return (envelope) => textDecoder.decode(envelope.body) as T;
    case 'bytes':
      return (envelope) => envelope.body as T;
    default:
      if (typeof decode !== 'function') {
        throw new ConfigError(
          'decode',
          `expected 'json', 'text', 'bytes' or a function, got ${JSON.stringify(decode)}`,
        );
      }
      return decode;
  }
}

/** The error of a lease that is already lost, before its handler ran. */
function lostError(lease: HeldLease): LeaseLostError | undefined {
  return lease.lost ? new LeaseLostError(lease.claim.group, lease.claim.key, lease.claim.attempt) : undefined;
}

/**
 * Turns a handler into `process(envelope) → Outcome`: reads the business key, claims it in the
 * ledger, runs the handler once per key and group, and says whether to ack, retry or dead-letter.
 * Usable inside any consumer loop; oncemq's transports call it too.
 */
export function createPipeline<Tx, T = unknown>(config: PipelineConfig<Tx, T>): Pipeline {
  const { ledger, handler } = config;
  const group = validateGroup(config.group);
  if (typeof handler !== 'function') throw new ConfigError('handler', 'must be a function');
  const mode: Mode = config.mode ?? (ledger.capabilities.transactional ? 'transactional' : 'leased');
  if (!(['transactional', 'leased'] as unknown[]).includes(mode)) {
    throw new ConfigError('mode', `expected 'transactional' or 'leased', got ${JSON.stringify(mode)}`);
  }
  if (mode === 'transactional' && !ledger.capabilities.transactional) {
    throw new ConfigError(
      'mode',
      `ledger '${ledger.name}' cannot share a transaction with the handler; use mode 'leased'`,
    );
  }
  if (mode === 'leased' && !ledger.capabilities.leased) {
    throw new ConfigError('mode', `ledger '${ledger.name}' has no leased claims; use mode 'transactional'`);
  }
  const extractKey: KeyExtractor = compileKeySource(config.key ?? DEFAULT_KEY_SOURCE);
  const decode = compileDecoder(config.decode ?? (DEFAULT_PIPELINE_CONFIG.decode as Decoder<T>));
  const fingerprintSource = config.fingerprint ?? true;
  const retry =
    config.retry instanceof RetryPolicy
      ? config.retry
      : config.retry
        ? new RetryPolicy(config.retry)
        : RetryPolicy.rocketmq();
  const replayMarginMs = parseDuration(
    config.replayMargin ?? DEFAULT_PIPELINE_CONFIG.replayMargin,
    'replayMargin',
  );
  checkRetention({
    retentionMs: ledger.retentionMs,
    policy: retry,
    replayMarginMs,
    what: `ledger '${ledger.name}'`,
  });
  const leaseMs = parseDuration(config.lease ?? DEFAULT_PIPELINE_CONFIG.lease, 'lease');
  if (leaseMs < 1) throw new ConfigError('lease', 'must be at least 1ms');
  const renewEveryMs = parseDuration(config.renewEvery ?? Math.floor(leaseMs / 3), 'renewEvery');
  if (renewEveryMs < 1 || renewEveryMs >= leaseMs) {
    throw new ConfigError(
      'renewEvery',
      `must be between 1ms and the lease (${leaseMs}ms), or the lease lapses while the handler runs`,
    );
  }
  const onFailure = config.onFailure ?? DEFAULT_PIPELINE_CONFIG.onFailure;
  const serializer = config.serializer ?? JSON_SERIALIZER;
  const logger = config.logger ?? SILENT_LOGGER;
  const counters = new OutcomeCounters();

  let closed = false;
  let initialized: Promise<void> | undefined;
  let ready = false;
  const ensureInit = (): Promise<void> => {
    initialized ??= ledger.init().then(
      () => {
        ready = true;
      },
      (error: unknown) => {
        initialized = undefined;
        throw error;
      },
    );
    return initialized;
  };

  const parse = (envelope: Envelope): ParsedDelivery<T> => {
    let message: T;
    try {
      message = decode(envelope);
    } catch (error) {
      if (error instanceof PermanentError) return { ok: false, key: null, error };
      return {
        ok: false,
        key: null,
        error: new PermanentError('malformed', `cannot decode the body: ${errorText(error)}`, {
          cause: error,
        }),
      };
    }
    let key: string;
    try {
      key = normalizeKey(extractKey(envelope, message));
    } catch (error) {
      if (error instanceof PermanentError) return { ok: false, key: null, error };
      return {
        ok: false,
        key: null,
        error: new PermanentError('invalid-key', `cannot read the business key: ${errorText(error)}`, {
          cause: error,
        }),
      };
    }
    let print: string | null;
    try {
      print = fingerprint(fingerprintSource, envelope, message);
    } catch (error) {
      return {
        ok: false,
        key,
        error: new PermanentError('malformed', `cannot fingerprint the payload: ${errorText(error)}`, {
          cause: error,
        }),
      };
    }
    return {
      ok: true,
      key,
      message,
      request: {
        group,
        key,
        fingerprint: print,
        brokerId: envelope.brokerId,
        topic: envelope.topic,
        leaseMs,
      },
    };
  };

  const context = (
    envelope: Envelope,
    key: string,
    claim: Claim,
    tx: Tx | undefined,
    signal: SignalSource,
  ): HandlerContext<Tx> => new PipelineContext(envelope, group, key, claim.attempt, mode, tx, signal);

  const store = (value: unknown): string | null => (value === undefined ? null : serializer.serialize(value));
  const leases = new LeaseKeeper(ledger, leaseMs, renewEveryMs, logger);
  const outcomes = new OutcomeBuilder(group, mode, retry, leaseMs, serializer);

  const runTransactional = async (
    envelope: Envelope,
    parsed: ParsedDelivery<T> & { ok: true },
    started: number,
  ): Promise<Outcome> => {
    const { key, message, request } = parsed;
    for (let run = 0; ; run++) {
      let value: unknown;
      const handler$ = { failed: false };
      try {
        const claimed = await ledger.transaction(request, (tx, claim) => {
          try {
            const out = handler(message, context(envelope, key, claim, tx, NEVER_ABORTED));
            if (isThenable(out)) {
              return Promise.resolve(out).then(
                (resolved) => store((value = resolved)),
                (error: unknown) => {
                  handler$.failed = true;
                  throw error;
                },
              );
            }
            value = out;
            return store(out);
          } catch (error) {
            handler$.failed = true;
            throw error;
          }
        });
        if (isWon(claimed)) {
          return outcomes.executed(envelope, key, started, claimed.claim, {
            reclaimed: claimed.status === 'reclaimed',
            leaseLost: false,
            result: value,
          });
        }
        return outcomes.notWon(envelope, key, claimed, started, request.fingerprint);
      } catch (error) {
        if (!handler$.failed && error instanceof LedgerUnavailableError)
          return outcomes.unavailable(envelope, key, error, started);
        if (!(error instanceof PermanentError) && run < retry.immediate) continue;
        try {
          await ledger.recordFailure(request, errorText(error));
        } catch (recordError) {
          logger.warn('oncemq: could not record a failed attempt', {
            group,
            key,
            error: errorText(recordError),
          });
        }
        return outcomes.failed(envelope, key, error, started);
      }
    }
  };

  const runLeased = async (
    envelope: Envelope,
    parsed: ParsedDelivery<T> & { ok: true },
    started: number,
  ): Promise<Outcome> => {
    const { key, request } = parsed;
    let claimed: ClaimResult;
    try {
      claimed = await ledger.claim(request);
    } catch (error) {
      return outcomes.unavailable(envelope, key, error, started);
    }
    if (!isWon(claimed)) {
      return outcomes.notWon(envelope, key, claimed, started, request.fingerprint);
    }
    return (await runHeld(envelope, parsed, claimed, leases.hold(claimed.claim), started)).settled;
  };

  /**
   * Runs the handler of a won leased claim whose lease is held, then starts completing (or failing)
   * the claim: `settled` gives the outcome once the ledger has recorded it. A batch runs its next
   * handler while this completion is on its way, so concurrent completions can share a round trip.
   */
  const runHeld = async (
    envelope: Envelope,
    parsed: ParsedDelivery<T> & { ok: true },
    claimed: Extract<ClaimResult, { status: 'acquired' | 'reclaimed' }>,
    lease: HeldLease,
    started: number,
  ): Promise<{ readonly settled: Promise<Outcome> }> => {
    const { key, message } = parsed;
    const lostWhileWaiting = lostError(lease);
    if (lostWhileWaiting !== undefined) {
      // Lost while the delivery waited its turn in a batch: someone else may hold the key now.
      leases.release(lease);
      return { settled: Promise.resolve(outcomes.unavailable(envelope, key, lostWhileWaiting, started)) };
    }
    let value: unknown;
    let failure: unknown;
    let ok = false;
    try {
      for (let run = 0; ; run++) {
        try {
          value = await handler(message, context(envelope, key, lease.claim, undefined, lease));
          ok = true;
          break;
        } catch (error) {
          if (error instanceof PermanentError || run >= retry.immediate || lease.lost) {
            failure = error;
            break;
          }
        }
      }
    } finally {
      leases.release(lease);
    }
    const claim = lease.claim;
    const settle = async (): Promise<Outcome> => {
      if (ok) {
        let leaseLost = false;
        try {
          await ledger.complete(claim, store(value));
        } catch (error) {
          if (!(error instanceof LeaseLostError)) return outcomes.unavailable(envelope, key, error, started);
          leaseLost = true;
          logger.warn('oncemq: lease lost before completion; another owner may apply the effect again', {
            group,
            key,
            attempt: claim.attempt,
          });
        }
        return outcomes.executed(envelope, key, started, claim, {
          reclaimed: claimed.status === 'reclaimed',
          leaseLost,
          result: value,
        });
      }
      try {
        if (onFailure === 'release') await ledger.release(claim);
        else await ledger.fail(claim, errorText(failure));
      } catch (error) {
        logger.warn('oncemq: could not record a failed attempt', { group, key, error: errorText(error) });
      }
      return outcomes.failed(envelope, key, failure, started);
    };
    return { settled: settle() };
  };

  const finish = (outcome: Outcome): Outcome => {
    counters.record(outcome);
    if (outcome.kind === 'dead' || outcome.kind === 'conflict') {
      logger.warn(`oncemq: dead-lettered (${outcome.reason})`, {
        group,
        key: outcome.key,
        brokerId: outcome.brokerId,
        error: errorText(outcome.error),
      });
    } else if (outcome.kind === 'retry') {
      logger.info('oncemq: retry scheduled', {
        group,
        key: outcome.key,
        delayMs: outcome.delayMs,
        error: errorText(outcome.error),
      });
    } else {
      logger.debug(`oncemq: ${outcome.kind}`, {
        group,
        key: outcome.key,
        brokerId: outcome.brokerId,
        ...(outcome.kind === 'executed' ? { attempt: outcome.attempt } : { source: outcome.source }),
      });
    }
    if (config.onOutcome) {
      try {
        config.onOutcome(outcome);
      } catch (error) {
        logger.error('oncemq: onOutcome listener threw', { error: errorText(error) });
      }
    }
    return outcome;
  };

  const pipeline: Pipeline = {
    group,
    mode,
    retry,
    async process(envelope: Envelope): Promise<Outcome> {
      if (closed) throw new ClosedError(`pipeline of group '${group}'`);
      const started = performance.now();
      const parsed = parse(envelope);
      if (!parsed.ok) return finish(outcomes.failed(envelope, parsed.key, parsed.error, started));
      try {
        if (!ready) await ensureInit();
      } catch (error) {
        if (error instanceof ConfigError) throw error;
        return finish(outcomes.unavailable(envelope, parsed.key, error, started));
      }
      return finish(
        mode === 'transactional'
          ? await runTransactional(envelope, parsed, started)
          : await runLeased(envelope, parsed, started),
      );
    },
    processBatch(envelopes: readonly Envelope[]): Promise<Outcome[]> {
      if (closed) return Promise.reject(new ClosedError(`pipeline of group '${group}'`));
      return processBatch(batchInternals, envelopes);
    },
    metrics: () => counters.snapshot(),
    close(): void {
      closed = true;
    },
  };
  const batchInternals: BatchInternals<Tx, T> = {
    ledger,
    mode,
    parse,
    ensureInit,
    holdLease: (claim) => leases.hold(claim),
    releaseLease: (lease) => {
      leases.release(lease);
    },
    runHeld,
    runHandler: (envelope, parsed, claim, tx) =>
      handler(parsed.message, context(envelope, parsed.key, claim, tx, NEVER_ABORTED)),
    store,
    executed: (envelope, key, claimed, value, started) =>
      outcomes.executed(envelope, key, started, claimed.claim, {
        reclaimed: claimed.status === 'reclaimed',
        leaseLost: false,
        result: value,
      }),
    notWon: (envelope, key, claimed, started, fingerprint) =>
      outcomes.notWon(envelope, key, claimed, started, fingerprint),
    failed: (envelope, key, error, started) => outcomes.failed(envelope, key, error, started),
    unavailable: (envelope, key, error, started) => outcomes.unavailable(envelope, key, error, started),
    finish,
    process: (envelope) => pipeline.process(envelope),
  };
  return pipeline;
}
