import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { wholeNumber } from '../config-checks.js';
import { toLogger, type Logger, type LoggerLike } from '../../core/logger.js';
import type { LocalFaultHooks } from './local-fault-hooks.js';
import type { ConsumerSettings } from './local-consumer.js';
import { roundRobinSelector, type QueueSelector } from './local-queue-selector.js';

/** Input of `new LocalBroker(config)`: the SQLite file, queues, and consumer timings. */
export interface LocalBrokerConfig {
  /** SQLite file of the broker, shared by every process that opens it; `:memory:` for a private one. @default './.oncemq/broker.db' */
  readonly path?: string;
  /** Host and port written into broker ids (`host:port-offset`), as RocketMQ's offset message id. @default '127.0.0.1:10911' */
  readonly address?: string;
  /**
   * Queues of a topic created on first use. A topic keeps the count it was created with; a broker
   * configured with another count explicitly is refused (`ConfigError` on `queues`) on that topic,
   * since another count would move ordering keys between queues. @default 4
   */
  readonly queues?: number;
  /** How often a consumer persists the offsets it processed. @default '5s' */
  readonly commitInterval?: Duration;
  /** How often a consumer heart-beats and looks for members that joined or left. @default '1s' */
  readonly heartbeatInterval?: Duration;
  /** A member silent this long is removed and its queues rebalanced. @default '10s' */
  readonly sessionTimeout?: Duration;
  /** Messages pulled from a queue at once. @default 32 */
  readonly pullBatchSize?: number;
  /** Wait between pulls when no queue had a message. @default '20ms' */
  readonly pollInterval?: Duration;
  /** Where a group without committed offsets starts. @default 'first' */
  readonly consumeFrom?: 'first' | 'last';
  /** Sends of one message before giving up when confirms are lost (RocketMQ's 1 + retryTimesWhenSendFailed). @default 3 */
  readonly sendAttempts?: number;
  /** Chooses a message's queue. @default round robin, or hash of the ordering key */
  readonly selector?: QueueSelector;
  /** `normal` survives a process crash (RocketMQ's async flush); `full` also a power loss. @default 'normal' */
  readonly synchronous?: 'normal' | 'full';
  /** How long to wait for another process's write lock. @default '5s' */
  readonly busyTimeout?: Duration;
  /**
   * Create the file and its tables, or upgrade them, when opening. With `false` the file must exist
   * with the current tables (what the read-only tools use): a missing file or table is an error,
   * and nothing is created. @default true
   */
  readonly migrate?: boolean;
  /** Fault hooks (a `FaultInjector` from `oncemq/testing`). @default none */
  readonly faults?: LocalFaultHooks;
  /**
   * Where rebalances, crashes and consumer failures are logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Defaults of the {@link LocalBrokerConfig} fields that have a fixed one. */
export const DEFAULT_LOCAL_BROKER_CONFIG = Object.freeze({
  /** The broker's SQLite file, under the working directory. */
  path: './.oncemq/broker.db',
  /** The address written into broker ids. */
  address: '127.0.0.1:10911',
  /** Queues of a topic created on first use. */
  queues: 4,
  /** How often a consumer persists its offsets. */
  commitInterval: '5s',
  /** How often a consumer heart-beats. */
  heartbeatInterval: '1s',
  /** A member silent this long is removed. */
  sessionTimeout: '10s',
  /** Messages pulled from a queue at once. */
  pullBatchSize: 32,
  /** Wait between pulls that found nothing. */
  pollInterval: '20ms',
  /** A new group starts at the first stored message. */
  consumeFrom: 'first',
  /** Sends of one message when confirms are lost. */
  sendAttempts: 3,
  /** Survives a process crash, as RocketMQ's async flush. */
  synchronous: 'normal',
  /** Wait for another process's write lock. */
  busyTimeout: '5s',
} as const);

/** A local broker's configuration, checked, with its defaults. */
export interface ResolvedLocalBrokerConfig {
  readonly path: string;
  readonly address: string;
  readonly queues: number;
  /** Whether `queues` was configured (a topic with another count is then refused), not defaulted. */
  readonly queuesConfigured: boolean;
  readonly settings: ConsumerSettings;
  readonly sendAttempts: number;
  readonly selector: QueueSelector;
  readonly synchronous: 'normal' | 'full';
  readonly busyTimeoutMs: number;
  readonly faults: LocalFaultHooks | undefined;
  readonly migrate: boolean;
  readonly logger: Logger;
}

/** Checks a local broker's configuration at construction: a bad value fails here, not when used. */
export function resolveLocalBrokerConfig(config: LocalBrokerConfig): ResolvedLocalBrokerConfig {
  const d = DEFAULT_LOCAL_BROKER_CONFIG;
  const path = config.path ?? d.path;
  if (typeof path !== 'string' || path === '')
    throw new ConfigError('path', 'must be a file path or ":memory:"');
  const address = config.address ?? d.address;
  if (!/^[^\s/]+:\d{1,5}$/.test(address)) {
    throw new ConfigError('address', `expected host:port, got ${JSON.stringify(address)}`);
  }
  const queues = wholeNumber(config.queues ?? d.queues, 'queues');
  const consumeFrom = config.consumeFrom ?? d.consumeFrom;
  if (!(['first', 'last'] as unknown[]).includes(consumeFrom)) {
    throw new ConfigError('consumeFrom', `expected 'first' or 'last', got ${JSON.stringify(consumeFrom)}`);
  }
  const heartbeatIntervalMs = parseDuration(
    config.heartbeatInterval ?? d.heartbeatInterval,
    'heartbeatInterval',
  );
  const sessionTimeoutMs = parseDuration(config.sessionTimeout ?? d.sessionTimeout, 'sessionTimeout');
  if (sessionTimeoutMs <= heartbeatIntervalMs) {
    throw new ConfigError(
      'sessionTimeout',
      'must be longer than heartbeatInterval, or live members are expired',
    );
  }
  const settings: ConsumerSettings = Object.freeze({
    pullBatchSize: wholeNumber(config.pullBatchSize ?? d.pullBatchSize, 'pullBatchSize'),
    pollIntervalMs: Math.max(1, parseDuration(config.pollInterval ?? d.pollInterval, 'pollInterval')),
    commitIntervalMs: Math.max(1, parseDuration(config.commitInterval ?? d.commitInterval, 'commitInterval')),
    heartbeatIntervalMs: Math.max(1, heartbeatIntervalMs),
    sessionTimeoutMs,
    consumeFrom,
    concurrency: 1,
    batches: true,
    ordering: undefined,
  });
  const sendAttempts = wholeNumber(config.sendAttempts ?? d.sendAttempts, 'sendAttempts');
  const selector = config.selector ?? roundRobinSelector();
  const synchronous = config.synchronous ?? d.synchronous;
  if (!(['normal', 'full'] as unknown[]).includes(synchronous)) {
    throw new ConfigError('synchronous', `expected 'normal' or 'full', got ${JSON.stringify(synchronous)}`);
  }
  const busyTimeoutMs = parseDuration(config.busyTimeout ?? d.busyTimeout, 'busyTimeout');
  return Object.freeze({
    path,
    address,
    queues,
    queuesConfigured: config.queues !== undefined,
    settings,
    sendAttempts,
    selector,
    synchronous,
    busyTimeoutMs,
    faults: config.faults,
    migrate: config.migrate ?? true,
    logger: toLogger(config.logger),
  });
}
