import { ROCKETMQ_DELAY_LEVELS } from '../../core/retry-policy.js';
import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { wholeNumber } from '../config-checks.js';
import { toLogger, type Logger, type LoggerLike } from '../../core/logger.js';
import type { AmqpConnectionLike } from './rabbitmq-driver.js';
import { RABBIT_SLOTS } from './rabbitmq-names.js';

/**
 * Delays of the retry queues: one durable queue per level whose message TTL is the level, so a long
 * delay never holds back a short one. RocketMQ's 18 levels, plus three below a second for the short
 * waits of a busy key. A retry waits the smallest level at least as long as its delay.
 */
export const DEFAULT_RABBITMQ_DELAY_LEVELS: readonly string[] = Object.freeze([
  '100ms',
  '250ms',
  '500ms',
  ...ROCKETMQ_DELAY_LEVELS,
]);

/** Input of `new RabbitTransport(config)`: the broker, the names of what it declares, and its timings. */
export interface RabbitTransportConfig {
  /** The broker. Not used when `connection` is given. @default 'amqp://guest:guest@127.0.0.1:5672' */
  readonly url?: string;
  /**
   * Your own amqplib connection. A recovering one (`connect(url, { recovery: true })`) is recovered
   * after a connection loss; a plain one is not (its loss is final for this transport). The transport
   * opens its channels on it and never closes it. @default a recovering connection to `url`
   */
  readonly connection?: AmqpConnectionLike;
  /**
   * The direct exchange messages are published to; the routing key is the topic. Two applications
   * on one broker are kept apart by their `prefix` only if their exchanges differ too: unset, it is
   * the prefix. @default the prefix ('oncemq')
   */
  readonly exchange?: string;
  /**
   * The application's namespace on the broker: first part of every queue name this transport
   * declares (`oncemq.points`, …) and, unless `exchange` is set, the exchange's name. @default 'oncemq'
   */
  readonly prefix?: string;
  /**
   * `create` declares exchanges and queues (idempotent); `check` declares nothing, and anything
   * missing is a `ConfigError` naming it (what the CLI tools use). @default 'create'
   */
  readonly topology?: 'create' | 'check';
  /** Type of the queues: quorum where the server has them (3.8+), classic otherwise. @default 'auto' */
  readonly queueType?: 'auto' | 'quorum' | 'classic';
  /**
   * How long each topic's log (a RabbitMQ stream beside the group queues) keeps messages, so that a
   * group subscribing for the first time gets what was published before it existed (`from:
   * 'earliest'`). The log stores every publish a second time. `false` keeps none: a new group starts
   * from `now` (`earliest` is refused), and a publish that no group's queue receives is refused as
   * unroutable. @default '7d'
   */
  readonly retention?: Duration | false;
  /** Delays of the retry queues, shortest first. @default DEFAULT_RABBITMQ_DELAY_LEVELS */
  readonly delayLevels?: readonly Duration[];
  /** Sends of one message when its confirm is lost (channel closed, nack) before giving up. @default 3 */
  readonly publishAttempts?: number;
  /** Longest wait of a publish for a connection and its confirm. @default '30s' */
  readonly publishTimeout?: Duration;
  /**
   * The server's `max_message_size` in bytes (RabbitMQ 3.10's default: 128 MiB): a dead-letter copy
   * over it, or whose headers are over what one content-header frame carries, is stored cut
   * (docs/transports/dead-letters.md) instead of being refused on every delivery. @default 134217728
   */
  readonly maxMessageSize?: number;
  /** First wait before re-opening a lost channel; doubles up to `maxReconnectDelay`. @default '100ms' */
  readonly reconnectDelay?: Duration;
  /** Longest wait between two attempts to re-open a lost channel. @default '5s' */
  readonly maxReconnectDelay?: Duration;
  /**
   * Longest wait of a close for the broker's answer: a consumer's cancel, a channel's close-ok, the
   * connection's close-ok. Past it a channel counts as closed, and the connection's socket is
   * destroyed (a broker or network that stopped answering never makes `close()` hang). @default '5s'
   */
  readonly closeTimeout?: Duration;
  /**
   * Wait before a delivery whose processor threw (not a message's fault) is handed back to the
   * queue, doubled for each failure in a row up to 16×; never an immediate requeue loop. @default '500ms'
   */
  readonly failureBackoff?: Duration;
  /**
   * Partition queues of a group subscribed with `ordering` (each consumed by one member at a time).
   * Recorded at the broker when the group is first set up; a member asking for another count is
   * refused. From 1 to 64. @default 4
   */
  readonly partitions?: number;
  /**
   * Where connection losses, topology changes and settle failures are logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Defaults of the {@link RabbitTransportConfig} fields that have a fixed one. */
export const DEFAULT_RABBIT_TRANSPORT_CONFIG = Object.freeze({
  /** A local broker with the default user. */
  url: 'amqp://guest:guest@127.0.0.1:5672',
  /** The direct exchange messages are published to, when neither `exchange` nor `prefix` is set. */
  exchange: 'oncemq',
  /** First part of every queue name. */
  prefix: 'oncemq',
  /** Exchanges and queues are declared. */
  topology: 'create',
  /** Quorum queues where the server has them. */
  queueType: 'auto',
  /** Each topic's log keeps a week of messages. */
  retention: '7d',
  /** RocketMQ's levels plus three below a second. */
  delayLevels: DEFAULT_RABBITMQ_DELAY_LEVELS,
  /** Sends of one message when its confirm is lost. */
  publishAttempts: 3,
  /** Longest wait of a publish. */
  publishTimeout: '30s',
  /** RabbitMQ 3.10's default `max_message_size`, 128 MiB. */
  maxMessageSize: 134_217_728,
  /** First wait before re-opening a lost channel. */
  reconnectDelay: '100ms',
  /** Longest wait before re-opening a lost channel. */
  maxReconnectDelay: '5s',
  /** Longest wait of a close for the broker's answer. */
  closeTimeout: '5s',
  /** Wait before a delivery whose processor threw is handed back. */
  failureBackoff: '500ms',
  /** Partition queues of an ordered group. */
  partitions: 4,
} as const);

/** The validated configuration, durations in milliseconds. */
export interface RabbitSettings {
  /** The broker's URL (unused when `connection` is given). */
  readonly url: string;
  /** Your own connection, or `undefined` when the transport opens one to `url`. */
  readonly connection: AmqpConnectionLike | undefined;
  /** The direct exchange messages are published to. */
  readonly exchange: string;
  /** First part of every queue name. */
  readonly prefix: string;
  /** Whether the transport declares its topology or only checks it. */
  readonly topology: 'create' | 'check';
  /** Type of the queues the transport declares. */
  readonly queueType: 'auto' | 'quorum' | 'classic';
  /** How long a topic's log keeps messages; `false` for no log. */
  readonly retentionMs: number | false;
  /** Delays of the retry queues, shortest first. */
  readonly delayLevelsMs: readonly number[];
  /** Sends of one message when its confirm is lost. */
  readonly publishAttempts: number;
  /** Longest wait of a publish for a connection and its confirm. */
  readonly publishTimeoutMs: number;
  /** The server's `max_message_size`, in bytes. */
  readonly maxMessageSize: number;
  /** First wait before re-opening a lost channel. */
  readonly reconnectDelayMs: number;
  /** Longest wait before re-opening a lost channel. */
  readonly maxReconnectDelayMs: number;
  /** Longest wait of a close for the broker's answer. */
  readonly closeTimeoutMs: number;
  /** First wait before a delivery whose processor threw is handed back. */
  readonly failureBackoffMs: number;
  /** Partition queues of an ordered group. */
  readonly partitions: number;
  /** Where the transport logs. */
  readonly logger: Logger;
}

/** Names RabbitMQ accepts and oncemq's own names cannot collide with (no `@`, no `amq.` start). */
const NAME_PATTERN = /^(?!amq\.)[A-Za-z0-9_.:-]{1,64}$/;

function oneOf<T extends string>(value: T, allowed: readonly T[], field: string): T {
  if (!allowed.includes(value)) {
    throw new ConfigError(
      field,
      `expected ${allowed.map((a) => `'${a}'`).join(' or ')}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function name(value: string, field: string): string {
  if (typeof value !== 'string' || !NAME_PATTERN.test(value)) {
    throw new ConfigError(
      field,
      `${JSON.stringify(value)} is not usable; use 1 to 64 letters, digits or _ . : - (not starting with amq.)`,
    );
  }
  return value;
}

/** Validates a configuration, filling in the defaults. */
export function rabbitSettings(config: RabbitTransportConfig): RabbitSettings {
  const d = DEFAULT_RABBIT_TRANSPORT_CONFIG;
  const url = config.url ?? d.url;
  if (config.connection === undefined && !/^amqps?:\/\//.test(url)) {
    throw new ConfigError('url', `expected an amqp:// or amqps:// URL, got ${JSON.stringify(url)}`);
  }
  const retention = config.retention ?? d.retention;
  const levels = (config.delayLevels ?? d.delayLevels).map((level, index) =>
    parseDuration(level, `delayLevels[${index}]`),
  );
  if (levels.length === 0) throw new ConfigError('delayLevels', 'name at least one delay');
  for (const [index, level] of levels.entries()) {
    if (!Number.isInteger(level) || level < 1 || level > 0xffffffff) {
      throw new ConfigError(`delayLevels[${index}]`, `must be a whole number of ms from 1ms, got ${level}`);
    }
    if (index > 0 && level <= (levels[index - 1] ?? 0)) {
      throw new ConfigError('delayLevels', 'list the delays shortest first, each once');
    }
  }
  const publishAttempts = config.publishAttempts ?? d.publishAttempts;
  if (!Number.isInteger(publishAttempts) || publishAttempts < 1) {
    throw new ConfigError('publishAttempts', `must be a whole number >= 1, got ${publishAttempts}`);
  }
  const reconnectDelayMs = parseDuration(config.reconnectDelay ?? d.reconnectDelay, 'reconnectDelay');
  const maxReconnectDelayMs = parseDuration(
    config.maxReconnectDelay ?? d.maxReconnectDelay,
    'maxReconnectDelay',
  );
  if (maxReconnectDelayMs < reconnectDelayMs) {
    throw new ConfigError('maxReconnectDelay', 'must not be shorter than reconnectDelay');
  }
  const closeTimeoutMs = parseDuration(config.closeTimeout ?? d.closeTimeout, 'closeTimeout');
  if (closeTimeoutMs < 1) throw new ConfigError('closeTimeout', 'must be at least 1ms');
  const publishTimeoutMs = parseDuration(config.publishTimeout ?? d.publishTimeout, 'publishTimeout');
  if (publishTimeoutMs < 1) throw new ConfigError('publishTimeout', 'must be at least 1ms');
  const partitions = config.partitions ?? d.partitions;
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > RABBIT_SLOTS) {
    throw new ConfigError(
      'partitions',
      `must be a whole number from 1 to ${RABBIT_SLOTS}, got ${partitions}`,
    );
  }
  let retentionMs: number | false = false;
  if (retention !== false) {
    retentionMs = parseDuration(retention, 'retention');
    if (retentionMs < 1000) throw new ConfigError('retention', 'must be at least 1s, or false');
  }
  return Object.freeze({
    url,
    connection: config.connection,
    // Unset, the exchange follows the prefix: two prefixes on one broker share no exchange.
    exchange: name(
      config.exchange ?? config.prefix ?? d.exchange,
      config.exchange === undefined ? 'prefix' : 'exchange',
    ),
    prefix: name(config.prefix ?? d.prefix, 'prefix'),
    topology: oneOf(config.topology ?? d.topology, ['create', 'check'], 'topology'),
    queueType: oneOf(config.queueType ?? d.queueType, ['auto', 'quorum', 'classic'], 'queueType'),
    retentionMs,
    delayLevelsMs: Object.freeze(levels),
    publishAttempts,
    publishTimeoutMs,
    maxMessageSize: wholeNumber(config.maxMessageSize ?? d.maxMessageSize, 'maxMessageSize', 4096),
    reconnectDelayMs: Math.max(1, reconnectDelayMs),
    maxReconnectDelayMs: Math.max(1, maxReconnectDelayMs),
    closeTimeoutMs,
    failureBackoffMs: parseDuration(config.failureBackoff ?? d.failureBackoff, 'failureBackoff'),
    partitions,
    logger: toLogger(config.logger),
  });
}
