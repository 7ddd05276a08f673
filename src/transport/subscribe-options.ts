import { ConfigError } from '../core/errors.js';
import { validateGroup } from '../core/group.js';
import { wholeNumber } from './config-checks.js';
import { checkOrderingOptions } from './ordered/ordering-gate.js';
import {
  DEFAULT_SUBSCRIBE_OPTIONS,
  startPosition,
  type OrderingOptions,
  type Processor,
  type StartPosition,
  type SubscribeOptions,
} from './transport.js';

/** What every broker needs to know of a subscribe, checked once, before it touches the broker. */
export interface CheckedSubscribe {
  readonly group: string;
  readonly topics: readonly string[];
  /** Deliveries processed at once. */
  readonly concurrency: number;
  /** Deliveries handed to `processBatch` at once: 1 when the processor has none (or the subscription is ordered). */
  readonly batchSize: number;
  readonly from: StartPosition;
  /** The ordering options, checked; undefined for an unordered subscription. */
  readonly ordering: OrderingOptions | undefined;
}

/** What a broker tells {@link checkSubscribe} of itself. */
export interface SubscribeRules {
  /** Throws a `ConfigError` for a topic name the broker cannot carry. */
  readonly topic?: (topic: string) => void;
  /** The largest batch the broker hands out at once (a receive's limit). */
  readonly maxBatchSize?: number;
  /** Why a group cannot start at the earliest message here (see `startPosition`). */
  readonly noEarliest?: string;
  /** The transport's name, when it cannot keep per-key order: `ordering` is refused naming it. */
  readonly unordered?: string;
}

/**
 * Checks a subscribe's group, topics and options the same way on every broker: a valid group, at
 * least one topic (each checked by the broker's rule), a whole `concurrency` ≥ 1, a `batchSize` no
 * larger than `concurrency` (a batch is held at once) nor the broker's limit (unset: the smaller of
 * the two), a known start position, and valid ordering options. Every refusal is a `ConfigError` naming the field.
 */
export function checkSubscribe(
  group: string,
  topics: readonly string[],
  processor: Pick<Processor, 'processBatch'>,
  options: SubscribeOptions = {},
  rules: SubscribeRules = {},
): CheckedSubscribe {
  validateGroup(group);
  const list: unknown = topics;
  if (!Array.isArray(list) || topics.length === 0) {
    throw new ConfigError('topics', 'name at least one topic');
  }
  if (rules.topic !== undefined) for (const topic of topics) rules.topic(topic);
  const concurrency = wholeNumber(
    options.concurrency ?? DEFAULT_SUBSCRIBE_OPTIONS.concurrency,
    'concurrency',
  );
  const from = startPosition(options, rules.noEarliest);
  const { ordering } = options;
  if (ordering !== undefined) {
    if (rules.unordered !== undefined) {
      throw new ConfigError(
        'ordering',
        `the ${rules.unordered} transport cannot keep per-key order yet; subscribe without ordering, or use a transport with the ordering capability`,
      );
    }
    checkOrderingOptions(ordering);
  }
  const batchSize =
    processor.processBatch === undefined || ordering !== undefined
      ? 1
      : wholeNumber(
          // Unasked, a batch is as large as the concurrency allows, within the broker's limit.
          options.batchSize ?? Math.min(concurrency, rules.maxBatchSize ?? concurrency),
          'batchSize',
          1,
          rules.maxBatchSize,
        );
  if (batchSize > concurrency) {
    throw new ConfigError(
      'batchSize',
      `${batchSize} is more than concurrency ${concurrency}; a batch is held at once`,
    );
  }
  return { group, topics: Object.freeze([...topics]), concurrency, batchSize, from, ordering };
}
