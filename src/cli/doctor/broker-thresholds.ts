import { formatDuration } from '../../core/duration.js';
import { errorText } from '../../core/errors.js';
import { redactUrl } from '../../core/unreachable.js';
import type { DoctorSettings, Finding } from './findings.js';

/**
 * The figures every broker check compares what it reads against, taken from the deployment's settings
 * once, so that each broker file says only what it reads and how it names it (docs/doctor.md, Broker checks).
 */
export interface BrokerNeeds {
  /**
   * Deliveries the retry policy makes of one message before it dead-letters it: its immediate
   * retries, its delayed retries, and the first delivery. A broker that stops delivering sooner takes
   * the message away from the policy.
   */
  readonly deliveries: number;
  /** The policy's redelivery horizon: from the first delivery to the last retry. */
  readonly horizonMs: number;
  /** The horizon plus the replay margin: how long a message stays useful to replay. */
  readonly keepMs: number;
  /** The replay margin alone: how long dead letters must stay to be replayed. */
  readonly replayMarginMs: number;
  /** The longest delay of one retry: what a copy waiting for its retry must outlive. */
  readonly longestDelayMs: number;
  /**
   * The longest a handler holds one delivery: `--handler-timeout`, else `--lease`; undefined when
   * neither was given (the checks of a redelivery timer then say they could not compare).
   */
  readonly runMs: number | undefined;
  /** Which of the two `runMs` came from, for the summaries. */
  readonly runSource: '--handler-timeout' | '--lease' | undefined;
}

export function brokerNeeds(settings: DoctorSettings): BrokerNeeds {
  const { retry } = settings;
  const runSource =
    settings.handlerTimeoutMs !== undefined
      ? '--handler-timeout'
      : settings.leaseMs !== undefined
        ? '--lease'
        : undefined;
  return {
    deliveries: retry.immediate + retry.maxReconsumeTimes + 1,
    horizonMs: retry.horizonMs,
    keepMs: retry.horizonMs + settings.replayMarginMs,
    replayMarginMs: settings.replayMarginMs,
    longestDelayMs: Math.max(0, ...retry.delaysMs),
    runMs: settings.handlerTimeoutMs ?? settings.leaseMs,
    runSource,
  };
}

/** A value read from a broker, as a summary shows it (JSON for anything but a scalar). */
export function shown(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  return value === undefined ? 'undefined' : JSON.stringify(value);
}

/** A duration for a summary: `4h46m`, or `unlimited` for the brokers' "no limit" values. */
export function duration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms <= 0) return 'unlimited';
  return formatDuration(ms);
}

/**
 * A retention compared with what must outlive it: shorter than the horizon fails (a message can be
 * dropped while the policy still redelivers it), shorter than the horizon plus the replay margin
 * warns (a dead letter's replay finds it gone), else ok. `retentionMs` 0 or undefined: unlimited.
 */
export function retentionFinding(
  check: string,
  what: string,
  retentionMs: number | undefined,
  needs: BrokerNeeds,
  fix: string,
  detail: Readonly<Record<string, unknown>> = {},
): Finding {
  const figures = {
    ...detail,
    retentionMs: retentionMs ?? 0,
    horizonMs: needs.horizonMs,
    keepMs: needs.keepMs,
  };
  if (retentionMs === undefined || retentionMs <= 0) {
    return { check, status: 'ok', summary: `${what} keeps messages without a time limit`, detail: figures };
  }
  const compared = `${what} keeps messages ${duration(retentionMs)}`;
  if (retentionMs < needs.horizonMs) {
    return {
      check,
      status: 'fail',
      summary: `${compared}, less than the redelivery horizon ${duration(needs.horizonMs)}: a message can be dropped while it is still being retried`,
      fix,
      detail: figures,
    };
  }
  if (retentionMs < needs.keepMs) {
    return {
      check,
      status: 'warn',
      summary: `${compared}, less than the horizon plus the replay margin (${duration(needs.keepMs)}): a replay after the horizon may find the message gone`,
      fix,
      detail: figures,
    };
  }
  return {
    check,
    status: 'ok',
    summary: `${compared}, at least the horizon plus the replay margin (${duration(needs.keepMs)})`,
    detail: figures,
  };
}

/**
 * A redelivery timer (JetStream's ack wait, SQS's visibility timeout, RabbitMQ's consumer timeout)
 * compared with the handler's longest run: shorter gives `shorter` (the copy is delivered again, or
 * the channel closed, while the handler still runs), else ok. Without `--handler-timeout` or
 * `--lease`, ok with a note that nothing was compared.
 */
export function timerFinding(
  check: string,
  what: string,
  timerMs: number | undefined,
  needs: BrokerNeeds,
  shorter: { readonly status: 'warn' | 'fail'; readonly consequence: string; readonly fix: string },
  detail: Readonly<Record<string, unknown>> = {},
): Finding {
  const figures = { ...detail, timerMs: timerMs ?? 0, runMs: needs.runMs };
  if (timerMs === undefined || timerMs <= 0) {
    return { check, status: 'ok', summary: `${what} is unlimited`, detail: figures };
  }
  if (needs.runMs === undefined) {
    return {
      check,
      status: 'ok',
      summary: `${what} is ${duration(timerMs)}; give --handler-timeout (or --lease) to compare the handler's run with it`,
      detail: figures,
    };
  }
  if (timerMs < needs.runMs) {
    return {
      check,
      status: shorter.status,
      summary: `${what} is ${duration(timerMs)}, less than the handler's ${duration(needs.runMs)} (${needs.runSource ?? ''}): ${shorter.consequence}`,
      fix: shorter.fix,
      detail: figures,
    };
  }
  return {
    check,
    status: 'ok',
    summary: `${what} is ${duration(timerMs)}, at least the handler's ${duration(needs.runMs)} (${needs.runSource ?? ''})`,
    detail: figures,
  };
}

/** The finding of a stream, queue or topic oncemq's consumers read that is not on the broker. */
export function absentFinding(check: string, what: string, fix: string): Finding {
  return { check, status: 'fail', summary: `${what} is not there`, fix };
}

/** The one finding of a broker that could not be read at all: every check of it skipped, with why. */
export function unreachableFinding(transport: string, url: string, error: unknown, fix: string): Finding {
  return {
    check: `${transport}.reachable`,
    status: 'skip',
    summary: `could not read ${transport} at ${redactUrl(url)}: ${errorText(error)}`,
    fix,
  };
}

/** `fn()`, or `undefined` when it throws what `absent` recognises as "not there". */
export async function unlessAbsent<T>(
  fn: () => Promise<T>,
  absent: (error: unknown) => boolean,
): Promise<T | undefined> {
  try {
    return await fn();
  } catch (error) {
    if (absent(error)) return undefined;
    throw error;
  }
}
