import { isInstanceAcrossCopies } from './copy-identity.js';
import { formatDuration, parseDuration, type Duration } from './duration.js';
import { ConfigError } from './errors.js';
import { MAX_DELIVERY_COUNT } from './envelope.js';
import { MAX_RETRY_DELAY_MS } from './outcome.js';

/** RocketMQ's 18 message delay levels (`messageDelayLevel`), level 1 first. */
export const ROCKETMQ_DELAY_LEVELS: readonly string[] = Object.freeze([
  '1s',
  '5s',
  '10s',
  '30s',
  '1m',
  '2m',
  '3m',
  '4m',
  '5m',
  '6m',
  '7m',
  '8m',
  '9m',
  '10m',
  '20m',
  '30m',
  '1h',
  '2h',
]);

/** RocketMQ's default `maxReconsumeTimes` for concurrent consumers. */
export const ROCKETMQ_MAX_RECONSUME_TIMES = 16;

/** Reconsume n (0-based `reconsumeTimes`) waits delay level n + 3, as RocketMQ does. */
export const ROCKETMQ_FIRST_RETRY_LEVEL = 3;

/** Input of `new RetryPolicy(config)`, and what a pipeline's `retry` option takes instead of a policy. */
export interface RetryPolicyConfig {
  /** Name shown in messages and metrics. @default 'custom' */
  readonly name?: string;
  /** Handler re-runs within one delivery before a delayed retry. @default 0 */
  readonly immediate?: number;
  /**
   * Delay before each delayed retry, in order: reconsume n waits `delays[n]`. After the last one the
   * message is dead-lettered. An empty list dead-letters at the first failure. @default RocketMQ's schedule
   */
  readonly delays?: readonly Duration[];
}

/** What to do after a failed delivery. */
export type RetryDecision =
  | {
      /** Retries are left: deliver the message again after `delayMs`. */
      readonly action: 'retry';
      /** How long the retried copy waits before it is delivered. */
      readonly delayMs: number;
      /** The delayed retries the message had before this failure. */
      readonly reconsumeTimes: number;
    }
  | {
      /** The schedule is used up: dead-letter the message (reason `retries-exhausted`). */
      readonly action: 'dead-letter';
      /** The delayed retries the message had before this failure. */
      readonly reconsumeTimes: number;
    };

/**
 * Immediate retries in-process, then delayed retries, then the dead-letter queue.
 * The policy knows its redelivery horizon: the time from the first delivery to the last retry.
 */
export class RetryPolicy {
  /**
   * `instanceof` holds for a policy of the package's other build too (docs/packaging.md): an app that
   * imports and requires oncemq can give a pipeline a policy made with either.
   */
  static [Symbol.hasInstance](value: unknown): boolean {
    return isInstanceAcrossCopies(this, value, RETRY_POLICY_CLASS);
  }

  /** The policy's name (`rocketmq`, `exponential`, `none`, or the configured one), in messages and metrics. */
  readonly name: string;
  /** Handler re-runs within one delivery before a delayed retry. */
  readonly immediate: number;
  /** Delays of the delayed retries in milliseconds; its length is the most reconsumes allowed. */
  readonly delaysMs: readonly number[];

  constructor(config: RetryPolicyConfig = {}) {
    this.name = config.name ?? 'custom';
    const immediate = config.immediate ?? 0;
    if (!Number.isInteger(immediate) || immediate < 0) {
      throw new ConfigError('retry.immediate', `must be a whole number >= 0, got ${immediate}`);
    }
    this.immediate = immediate;
    const delays = config.delays ?? RetryPolicy.rocketmq().delaysMs;
    if (delays.length >= MAX_DELIVERY_COUNT) {
      // A delivery count above the bound is taken for a foreign producer's header (`invalid-header`).
      throw new ConfigError(
        'retry.delays',
        `at most ${MAX_DELIVERY_COUNT - 1} delayed retries, got ${delays.length}`,
      );
    }
    this.delaysMs = Object.freeze(
      delays.map((delay, index) => {
        const ms = parseDuration(delay, `retry.delays[${index}]`);
        if (ms > MAX_RETRY_DELAY_MS) {
          throw new ConfigError(
            `retry.delays[${index}]`,
            `at most 7d (a transport takes a later due time for a foreign header), got ${delay}`,
          );
        }
        return ms;
      }),
    );
    Object.freeze(this);
  }

  /**
   * RocketMQ's concurrent-consumer schedule: reconsume n waits level n + 3 of the 18 delay levels,
   * 16 reconsumes at most (10s, 30s, 1m, 2m … 1h, 2h — 4h45m40s in all), then the dead-letter queue.
   */
  static rocketmq(options: { immediate?: number; maxReconsumeTimes?: number } = {}): RetryPolicy {
    const max = options.maxReconsumeTimes ?? ROCKETMQ_MAX_RECONSUME_TIMES;
    if (!Number.isInteger(max) || max < 0) {
      throw new ConfigError('retry.maxReconsumeTimes', `must be a whole number >= 0, got ${max}`);
    }
    const delays: string[] = [];
    for (let n = 0; n < max; n++) {
      const level = Math.min(n + ROCKETMQ_FIRST_RETRY_LEVEL, ROCKETMQ_DELAY_LEVELS.length);
      delays.push(ROCKETMQ_DELAY_LEVELS[level - 1] ?? '2h');
    }
    return new RetryPolicy({ name: 'rocketmq', immediate: options.immediate ?? 0, delays });
  }

  /** Exponential backoff: `base`, ×`factor` each time, capped at `max`, `count` retries. */
  static exponential(options: {
    base: Duration;
    factor?: number;
    max: Duration;
    count: number;
    immediate?: number;
  }): RetryPolicy {
    const base = parseDuration(options.base, 'retry.base');
    const max = parseDuration(options.max, 'retry.max');
    const factor = options.factor ?? 2;
    if (!(factor >= 1)) throw new ConfigError('retry.factor', `must be >= 1, got ${factor}`);
    const delays = Array.from({ length: options.count }, (_, n) => Math.min(max, base * factor ** n));
    return new RetryPolicy({ name: 'exponential', immediate: options.immediate ?? 0, delays });
  }

  /** Dead-letter at the first failure (after immediate retries). */
  static none(options: { immediate?: number } = {}): RetryPolicy {
    return new RetryPolicy({ name: 'none', immediate: options.immediate ?? 0, delays: [] });
  }

  /** Most delayed retries before the dead-letter queue (RocketMQ's maxReconsumeTimes). */
  get maxReconsumeTimes(): number {
    return this.delaysMs.length;
  }

  /** Time from the first delivery to the last retry, if every retry waits its full delay. */
  get horizonMs(): number {
    return this.delaysMs.reduce((sum, delay) => sum + delay, 0);
  }

  /**
   * Decides after a failed delivery. `reconsumeTimes` is how many delayed retries the message has
   * already had (`deliveryCount - 1` for a broker that counts every delivery).
   */
  decide(reconsumeTimes: number): RetryDecision {
    const delay = this.delaysMs[reconsumeTimes];
    if (delay === undefined) return { action: 'dead-letter', reconsumeTimes };
    return { action: 'retry', delayMs: delay, reconsumeTimes };
  }

  /** Describes the policy for messages: name, immediate and delayed retries, and horizon. */
  toString(): string {
    return `retry policy '${this.name}' (${this.immediate} immediate, ${this.maxReconsumeTimes} delayed, horizon ${formatDuration(this.horizonMs)})`;
  }
}

/** Marks `RetryPolicy` in every copy of the package a process loads (see its `Symbol.hasInstance`). */
const RETRY_POLICY_CLASS = Symbol.for('oncemq.retry-policy-class');
Object.defineProperty(RetryPolicy, RETRY_POLICY_CLASS, { value: true });

/** Default replay margin added to the retry horizon: operators replay dead letters within a day. */
export const DEFAULT_REPLAY_MARGIN: Duration = '1d';

/**
 * Refuses a ledger retention that could forget a key while a copy of its message can still arrive.
 * The redelivery horizon is the retry policy's horizon plus the replay margin (broker retention and
 * how long after a failure an operator may replay a dead letter).
 */
export function checkRetention(options: {
  retentionMs: number;
  policy: RetryPolicy;
  replayMarginMs: number;
  what: string;
}): void {
  const horizon = options.policy.horizonMs + options.replayMarginMs;
  if (options.retentionMs < horizon) {
    throw new ConfigError(
      'retention',
      `${options.what} retention ${formatDuration(options.retentionMs)} is shorter than the redelivery horizon ` +
        `${formatDuration(horizon)} (${options.policy.name} retries ${formatDuration(options.policy.horizonMs)} + replay margin ` +
        `${formatDuration(options.replayMarginMs)}); raise the retention or shorten the retry schedule or the replay margin`,
    );
  }
}
