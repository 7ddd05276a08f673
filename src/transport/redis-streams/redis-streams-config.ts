import { hostname } from 'node:os';
import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { toLogger, type Logger, type LoggerLike } from '../../core/logger.js';
import { durationMs, wholeNumber } from '../config-checks.js';
import type { CheckedSubscribe } from '../subscribe-options.js';
import { DEFAULT_SUBSCRIBE_OPTIONS, type StartPosition, type SubscribeOptions } from '../transport.js';
import type { StreamClientInput } from './redis-streams-driver.js';
import { SHARD_SLOTS, StreamKeys } from './redis-streams-names.js';

/** Input of `new RedisStreamsTransport(config)`: the client, the key prefix, and timings. */
export interface RedisStreamsTransportConfig {
  /**
   * A connected node-redis v5+ or ioredis v5+ client (told apart by shape), or a `StreamConnection`.
   * Publishing, the dead letters and the topology go through it; each subscription opens two
   * connections of its own with the client's `duplicate()`. The transport never closes it.
   */
  readonly client: StreamClientInput;
  /** First word of every key: `<prefix>:stream:<topic>`, `<prefix>:retry:<group>`… @default 'oncemq' */
  readonly prefix?: string;
  /**
   * `create`: streams and consumer groups are created when missing (`XGROUP CREATE … 0 MKSTREAM`).
   * `check`: nothing is created; a missing stream or group is a `ConfigError` naming it (what the
   * CLI tools use). @default 'create'
   */
  readonly topology?: 'create' | 'check';
  /** Longest wait for one command (a publish's confirm, a settle, a claim); then it fails as unavailable. @default '10s' */
  readonly timeout?: Duration;
  /**
   * Sends of one publish when the connection breaks before its confirm arrives, 50ms apart and then
   * twice as long each time (up to 1s), so that a publish rides out a short outage. A resend is a new
   * copy with the same key (a producer retry): the consumers' ledger absorbs it. @default 5
   */
  readonly publishAttempts?: number;
  /** How long one blocking read waits for new entries before it reads again (after a lost connection, ioredis sends a read that was in flight again, and it may hold its connection this long). @default '2s' */
  readonly block?: Duration;
  /** Wait before a delivery whose processor threw, or whose settle failed, is handed out again. @default '1s' */
  readonly failureBackoff?: Duration;
  /**
   * Longest wait before a due delayed retry is moved to its group's retry stream. A member moves its
   * own retries when they are due; this bounds the wait for those of a member that left. @default '1s'
   */
  readonly retryPollInterval?: Duration;
  /** How long an entry that every group has read and acked stays in its stream before it is trimmed. @default '1h' */
  readonly retention?: Duration;
  /** How often each subscription trims its streams; 0 never trims. @default '1m' */
  readonly trimInterval?: Duration;
  /**
   * A delivery the broker has handed out this many times without an outcome (its consumers crashed
   * or lost their connection each time) is dead-lettered with reason `delivery-limit` instead of
   * being processed again; 0: no limit. @default 32
   */
  readonly maxDeliveries?: number;
  /**
   * Partitions of an ordered group (`subscribe(…, { ordering })`): partition `i` takes the shard
   * streams `n` with `n mod partitions = i`, and is consumed by one member at a time. The first member
   * records the count; a member configured with another is refused (or drains first, with
   * `ordering.onPartitionChange: 'drain'`). Producers do not need it. 1 to 64. @default 4
   */
  readonly partitions?: number;
  /**
   * Where lost connections, deleted entries and failures are logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Defaults of the {@link RedisStreamsTransportConfig} fields that have a fixed one. */
export const DEFAULT_REDIS_STREAMS_CONFIG = Object.freeze({
  /** First word of every key. */
  prefix: 'oncemq',
  /** Streams and consumer groups are created. */
  topology: 'create',
  /** Longest wait for one command. */
  timeout: '10s',
  /** Sends of one publish when its confirm is lost. */
  publishAttempts: 5,
  /** How long one blocking read waits. */
  block: '2s',
  /** Wait before a delivery whose processor threw is handed out again. */
  failureBackoff: '1s',
  /** Longest wait before a due retry is moved to its retry stream. */
  retryPollInterval: '1s',
  /** How long a read and acked entry stays before it is trimmed. */
  retention: '1h',
  /** How often each subscription trims its streams. */
  trimInterval: '1m',
  /** Deliveries without an outcome before an entry is dead-lettered (`delivery-limit`). */
  maxDeliveries: 32,
  /** Partitions of an ordered group. */
  partitions: 4,
} as const);

/** The configuration, checked, in milliseconds. */
export interface StreamSettings {
  readonly keys: StreamKeys;
  readonly topology: 'create' | 'check';
  readonly timeoutMs: number;
  readonly publishAttempts: number;
  readonly blockMs: number;
  readonly failureBackoffMs: number;
  readonly retryPollMs: number;
  readonly retentionMs: number;
  readonly trimEveryMs: number;
  readonly maxDeliveries: number;
  readonly partitions: number;
  readonly logger: Logger;
}

/** Checks a configuration and freezes it; a bad value fails here, at construction. */
export function resolveStreamSettings(config: RedisStreamsTransportConfig): StreamSettings {
  const d = DEFAULT_REDIS_STREAMS_CONFIG;
  const topology: string = config.topology ?? d.topology;
  if (topology !== 'create' && topology !== 'check') {
    throw new ConfigError('topology', `expected 'create' or 'check', got ${JSON.stringify(topology)}`);
  }
  const trimEveryMs = parseDuration(config.trimInterval ?? d.trimInterval, 'trimInterval');
  if (trimEveryMs !== 0 && trimEveryMs < 10) {
    throw new ConfigError('trimInterval', `must be 0 (never trim) or at least 10ms, got ${trimEveryMs}ms`);
  }
  return Object.freeze({
    keys: new StreamKeys(config.prefix ?? d.prefix),
    topology,
    timeoutMs: durationMs(config.timeout ?? d.timeout, 'timeout', 1),
    publishAttempts: wholeNumber(config.publishAttempts ?? d.publishAttempts, 'publishAttempts', 1),
    blockMs: durationMs(config.block ?? d.block, 'block', 1),
    failureBackoffMs: durationMs(config.failureBackoff ?? d.failureBackoff, 'failureBackoff', 1),
    retryPollMs: durationMs(config.retryPollInterval ?? d.retryPollInterval, 'retryPollInterval', 1),
    retentionMs: durationMs(config.retention ?? d.retention, 'retention', 0),
    trimEveryMs,
    maxDeliveries: wholeNumber(config.maxDeliveries ?? d.maxDeliveries, 'maxDeliveries', 0),
    partitions: wholeNumber(config.partitions ?? d.partitions, 'partitions', 1, SHARD_SLOTS),
    logger: toLogger(config.logger),
  });
}

/**
 * Options of {@link RedisStreamsTransport.subscribe}: the transport contract's, read the Redis Streams way.
 * - `concurrency`: deliveries of this member in flight at once; also the `COUNT` of each read. @default 16
 * - `batchSize`: most entries handed to `processBatch` at once, when the processor has it; 1 hands
 *   them one by one to `process`. @default the concurrency
 * - `visibility`: the pending-entry idle time after which another member of the group takes a
 *   delivery (`XAUTOCLAIM` min-idle-time, run every half of it); a long handler keeps its entry with
 *   `envelope.keepAlive` (a third of it). @default '30s'
 * - `consumerName`: the Redis consumer name of this member; give each member a stable name of its own
 *   (a pod name) so that a restarted member reads what it left pending at once. @default host:pid:n
 */
export type RedisStreamsSubscribeOptions = SubscribeOptions;

/** The subscribe options, checked. */
export interface SubscribeSettings {
  readonly concurrency: number;
  readonly batchSize: number;
  readonly visibilityMs: number;
  readonly consumerName: string;
  /** Where the group starts on a topic it has never consumed. */
  readonly from: StartPosition;
}

/** Shortest visibility: the keep-alive runs every third of it. */
export const MIN_VISIBILITY_MS = 100;

let members = 0;

/** Why an ordered group cannot start at the earliest message (`checkSubscribe`'s `noEarliest`). */
export const ORDERED_NO_EARLIEST =
  "an ordered group on Redis Streams reads its topics' shard streams, written only since the topic's first ordered group subscribed";

/**
 * The subscribe settings of a member, from the options `checkSubscribe` checked (`concurrency`,
 * `batchSize`, `from`) and its own; the default consumer name is unique in this process.
 */
export function resolveSubscribeSettings(
  options: RedisStreamsSubscribeOptions,
  checked: Pick<CheckedSubscribe, 'concurrency' | 'batchSize' | 'from'>,
): SubscribeSettings {
  const consumerName = options.consumerName ?? `${hostname()}:${process.pid}:${++members}`;
  if (typeof consumerName !== 'string' || !/^\S{1,200}$/.test(consumerName)) {
    throw new ConfigError(
      'consumerName',
      `expected 1 to 200 characters without spaces, got ${JSON.stringify(consumerName)}`,
    );
  }
  return Object.freeze({
    concurrency: checked.concurrency,
    batchSize: checked.batchSize,
    visibilityMs: durationMs(
      options.visibility ?? DEFAULT_SUBSCRIBE_OPTIONS.visibility,
      'visibility',
      MIN_VISIBILITY_MS,
    ),
    consumerName,
    from: checked.from,
  });
}
