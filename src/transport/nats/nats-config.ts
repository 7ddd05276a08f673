import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { durationMs, wholeNumber } from '../config-checks.js';
import { toLogger, type Logger, type LoggerLike } from '../../core/logger.js';
import {
  ORDERING_SLOTS,
  STREAM_PREFIX_PATTERN,
  SUBJECT_PREFIX_PATTERN,
  type NatsNames,
} from './nats-names.js';
import type { NatsConnectionLike } from './nats-driver.js';

/** `create`: streams and consumers are created (or updated) at start; `check`: nothing is created. */
export type NatsTopology = 'create' | 'check';

/** Input of `new NatsTransport(config)`: the connection, the names of streams and subjects, and timings. */
export interface NatsTransportConfig {
  /**
   * Your connection, from `connect()` of `@nats-io/transport-node` 3; oncemq uses it and does not
   * close it. Give it `maxReconnectAttempts: -1` so that it never gives up reconnecting.
   * @default none: oncemq connects to `servers` and closes that connection on `close()`
   */
  readonly connection?: NatsConnectionLike;
  /** Where oncemq connects when no `connection` is given. @default 'nats://127.0.0.1:4222' */
  readonly servers?: string | readonly string[];
  /**
   * `create`: streams and durable consumers are created when missing (and the settings oncemq owns
   * updated) at start. `check`: nothing is created or changed; a missing stream or consumer is a
   * `ConfigError` naming it (what the CLI tools use). @default 'create'
   */
  readonly topology?: NatsTopology;
  /** Prefix of stream names: `ONCEMQ_<topic>`, `ONCEMQ-RETRY`, `ONCEMQ-DLQ`. @default 'ONCEMQ' */
  readonly streamPrefix?: string;
  /** Prefix of subjects: `oncemq.<topic>`, `oncemq-retry.<group>`, `oncemq-dlq.<group>`. @default 'oncemq' */
  readonly subjectPrefix?: string;
  /**
   * The streams' duplicate window: a publish whose `Nats-Msg-Id` (the business key) the stream saw
   * this recently is dropped by the server. An extra filter before the ledger, never its replacement.
   * @default '2m'
   */
  readonly duplicateWindow?: Duration;
  /** Topic streams drop messages older than this; 0 keeps them until an operator limits them. @default 0 */
  readonly maxAge?: Duration;
  /** Storage of the streams oncemq creates. @default 'file' */
  readonly storage?: 'file' | 'memory';
  /** Replicas of the streams oncemq creates (a clustered server). @default 1 */
  readonly replicas?: number;
  /**
   * Deliveries of one stored copy that end neither acked nor charged (a processor that throws, a busy
   * key, a lost connection) before the transport dead-letters it with reason `max-deliveries`: a
   * backstop, since a charged retry is a new copy. The consumers' `max_deliver` is this plus
   * `MAX_DELIVER_GRACE`. @default 64
   */
  readonly maxDeliver?: number;
  /**
   * `max_ack_pending` of the consumers (all members together); -1 for no limit. Copies waiting for
   * a delayed `nak` are pending too, so a limit can stall the group behind them. @default -1
   */
  readonly maxAckPending?: number;
  /**
   * Partitions of an ordered group (`subscribe(…, { ordering })`): a power of two from 1 to 64. Each
   * is a durable consumer owned by one member at a time; the first member records the count and a
   * member with another count is refused, or, with `ordering.onPartitionChange: 'drain'`, moves the
   * group to its count: the old count's consumers run what was published before the switch, the new
   * count's start after it and run once the old ones are drained, then the old ones are deleted
   * (docs/transports/nats.md, "Changing the partition count"). @default 4
   */
  readonly partitions?: number;
  /**
   * How long a member's ownership of a partition of an ordered group lasts without renewal (renewed
   * every third of it): a member that vanishes gives its partitions up this long after its last
   * renewal. The first member fixes it for everyone (the lease stream's `max_age`). At least 2s: a
   * member's pulls end two thirds of a lease after its last renewal (and after its last read of the
   * group's count record, read as often: a drain of the partition count lasts at least one lease).
   * @default '10s'
   */
  readonly partitionLease?: Duration;
  /** How long one pull request waits for messages; `close()` waits for the pulls in progress. @default '5s' */
  readonly pullExpires?: Duration;
  /** Wait before a copy whose processor threw is delivered again (never charged). @default '1s' */
  readonly failureBackoff?: Duration;
  /** Deadline of one JetStream request: a publish confirm, an ack confirm, a management call. @default '5s' */
  readonly requestTimeout?: Duration;
  /**
   * How long `publish` keeps sending again (same `Nats-Msg-Id`) while the server cannot be reached
   * before it rejects with `TransportUnavailableError`. @default '30s'
   */
  readonly publishTimeout?: Duration;
  /**
   * Where created streams and consumers, lost connections and failures are logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Deliveries the server still makes past `maxDeliver`, so a copy whose consumer died on its last delivery can still be dead-lettered. */
export const MAX_DELIVER_GRACE = 3;

/** Defaults of the {@link NatsTransportConfig} fields that have a fixed one. */
export const DEFAULT_NATS_TRANSPORT_CONFIG = Object.freeze({
  /** A local nats-server. */
  servers: 'nats://127.0.0.1:4222',
  /** Streams and consumers are created at start. */
  topology: 'create',
  /** Prefix of stream names. */
  streamPrefix: 'ONCEMQ',
  /** Prefix of subjects. */
  subjectPrefix: 'oncemq',
  /** The streams' duplicate window. */
  duplicateWindow: '2m',
  /** Topic streams keep messages until an operator limits them. */
  maxAge: 0,
  /** Streams are stored on disk. */
  storage: 'file',
  /** One replica per stream. */
  replicas: 1,
  /** Uncharged deliveries of one copy before it is dead-lettered (`max-deliveries`). */
  maxDeliver: 64,
  /** No limit on pending acks. */
  maxAckPending: -1,
  /** Partitions of an ordered group. */
  partitions: 4,
  /** A member's ownership of an ordered group's partition, unrenewed. */
  partitionLease: '10s',
  /** How long one pull waits for messages. */
  pullExpires: '5s',
  /** Wait before a copy whose processor threw comes again. */
  failureBackoff: '1s',
  /** Deadline of one JetStream request. */
  requestTimeout: '5s',
  /** How long a publish keeps sending while the server is away. */
  publishTimeout: '30s',
} as const);

/** A validated, frozen {@link NatsTransportConfig}, durations in milliseconds. */
export interface NatsSettings extends NatsNames {
  readonly connection: NatsConnectionLike | undefined;
  readonly servers: readonly string[];
  readonly topology: NatsTopology;
  readonly duplicateWindowMs: number;
  readonly maxAgeMs: number;
  readonly storage: 'file' | 'memory';
  readonly replicas: number;
  readonly maxDeliver: number;
  readonly maxAckPending: number;
  readonly partitions: number;
  readonly partitionLeaseMs: number;
  readonly pullExpiresMs: number;
  readonly failureBackoffMs: number;
  readonly requestTimeoutMs: number;
  readonly publishTimeoutMs: number;
  readonly logger: Logger;
}

function oneOf<T extends string>(value: T, allowed: readonly T[], field: string): T {
  if (!allowed.includes(value)) {
    throw new ConfigError(
      field,
      `expected ${allowed.map((a) => `'${a}'`).join(' or ')}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function matching(value: string, pattern: RegExp, field: string, what: string): string {
  if (typeof value !== 'string' || !pattern.test(value)) {
    throw new ConfigError(field, `${JSON.stringify(value)} is not valid; use ${what}`);
  }
  return value;
}

/** A partition count: a power of two from 1 to {@link ORDERING_SLOTS} (a partition is a prefix of slot bits). */
export function partitionCount(value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > ORDERING_SLOTS || (value & (value - 1)) !== 0) {
    throw new ConfigError(
      'partitions',
      `must be a power of two from 1 to ${ORDERING_SLOTS} (1, 2, 4, 8, 16, 32 or 64), got ${value}`,
    );
  }
  return value;
}

/** Validates a config at construction: a bad value fails at start-up, naming the field. */
export function resolveNatsSettings(config: NatsTransportConfig): NatsSettings {
  const d = DEFAULT_NATS_TRANSPORT_CONFIG;
  const servers = config.servers ?? d.servers;
  const serverList = typeof servers === 'string' ? [servers] : [...servers];
  if (config.connection === undefined && (serverList.length === 0 || serverList.some((s) => s === ''))) {
    throw new ConfigError('servers', 'name at least one server URL, or pass your connection');
  }
  const maxAckPending = config.maxAckPending ?? d.maxAckPending;
  if (maxAckPending !== -1) wholeNumber(maxAckPending, 'maxAckPending', 1);
  const pullExpiresMs = parseDuration(config.pullExpires ?? d.pullExpires, 'pullExpires');
  if (pullExpiresMs < 1000)
    throw new ConfigError('pullExpires', 'must be at least 1s (the client refuses less)');
  const requestTimeoutMs = parseDuration(config.requestTimeout ?? d.requestTimeout, 'requestTimeout');
  if (requestTimeoutMs < 1) throw new ConfigError('requestTimeout', 'must be longer than 0');
  const duplicateWindowMs = parseDuration(config.duplicateWindow ?? d.duplicateWindow, 'duplicateWindow');
  if (duplicateWindowMs < 1)
    throw new ConfigError('duplicateWindow', 'must be longer than 0 (JetStream requires a window)');
  return Object.freeze({
    connection: config.connection,
    servers: Object.freeze(serverList),
    topology: oneOf(config.topology ?? d.topology, ['create', 'check'], 'topology'),
    streamPrefix: matching(
      config.streamPrefix ?? d.streamPrefix,
      STREAM_PREFIX_PATTERN,
      'streamPrefix',
      'letters, digits, _ or -',
    ),
    subjectPrefix: matching(
      config.subjectPrefix ?? d.subjectPrefix,
      SUBJECT_PREFIX_PATTERN,
      'subjectPrefix',
      'dot-separated tokens of letters, digits, _ or -',
    ),
    duplicateWindowMs,
    maxAgeMs: parseDuration(config.maxAge ?? d.maxAge, 'maxAge'),
    storage: oneOf(config.storage ?? d.storage, ['file', 'memory'], 'storage'),
    replicas: wholeNumber(config.replicas ?? d.replicas, 'replicas', 1),
    maxDeliver: wholeNumber(config.maxDeliver ?? d.maxDeliver, 'maxDeliver', 2),
    maxAckPending,
    partitions: partitionCount(config.partitions ?? d.partitions),
    // A member pulls for at most two thirds of a lease after a renewal, and a pull lasts at least 1 s.
    partitionLeaseMs: durationMs(config.partitionLease ?? d.partitionLease, 'partitionLease', 2000),
    pullExpiresMs,
    failureBackoffMs: parseDuration(config.failureBackoff ?? d.failureBackoff, 'failureBackoff'),
    requestTimeoutMs,
    publishTimeoutMs: parseDuration(config.publishTimeout ?? d.publishTimeout, 'publishTimeout'),
    logger: toLogger(config.logger),
  });
}
