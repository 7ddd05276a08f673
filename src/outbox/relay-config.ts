import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { parseDuration, type Duration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import { toLogger, type Logger, type LoggerLike } from '../core/logger.js';
import type { Transport } from '../transport/transport.js';
import type { Outbox } from './outbox.js';
import type { OutboxDatabase } from './outbox-database.js';
import type { RelayedMessage } from './relay-rows.js';

/** Fault hooks of a relay, for tests (a relay killed between publish and mark). */
export interface RelayFaults {
  /**
   * Called before each publish of a round, in order. Throwing {@link RelayCrash} kills the relay
   * there, as `kill -9` would: the publishes already under way complete at the broker but are never
   * marked sent, the later rows of the round are never published, and the leases run out.
   */
  beforePublish?(row: RelayedMessage): void;
}

/** Thrown by a fault hook to make the relay stop as if its process died. */
export class RelayCrash extends Error {
  /** Always `'RelayCrash'`. */
  override name = 'RelayCrash' as const;
}

/** Input of `createRelay(config)`: which outbox to read, where to publish, and how fast. */
export interface RelayConfig<Tx> {
  /** The outbox whose rows the relay sends (`createOutbox(...)`, migrated). */
  readonly outbox: Outbox<Tx>;
  /** Where the messages go; `publish` resolves on the broker's confirm. */
  readonly transport: Pick<Transport, 'name' | 'publish'>;
  /** Where the relay opens its own short transactions: a pg or mysql2 pool, or a SQLite database of its own. */
  readonly database: OutboxDatabase;
  /** Rows claimed (and published at once) per round. @default 100 */
  readonly batchSize?: number;
  /** Wait between rounds that found less than a batch (PostgreSQL's NOTIFY wakes the relay sooner). @default '500ms' */
  readonly pollInterval?: Duration;
  /** How long a claimed row is the relay's; a relay that dies leaves it to another after this. @default '30s' */
  readonly lease?: Duration;
  /** First wait after a round with a failed publish, doubled each failed round. @default '200ms' */
  readonly minBackoff?: Duration;
  /** Longest wait between failed rounds (and longest retry delay of a row). @default '30s' */
  readonly maxBackoff?: Duration;
  /** A publish not confirmed within this counts as failed (the row is tried again; a late confirm makes a duplicate the consumers absorb). @default '30s' */
  readonly publishTimeout?: Duration;
  /** How long sent rows are kept before cleanup deletes them. @default '1d' */
  readonly retention?: Duration;
  /** How often sent rows past their retention are deleted. @default '1m' */
  readonly cleanupEvery?: Duration;
  /** PostgreSQL: wake on the outbox's NOTIFY. @default true (ignored elsewhere) */
  readonly listen?: boolean;
  /** Owner token prefix written into the leases it holds. @default host, process id and a random suffix */
  readonly name?: string;
  /** Fault hooks for tests: kill the relay between publish and mark. @default none */
  readonly faults?: RelayFaults;
  /**
   * Where rounds, failures and back-offs are logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Defaults of the {@link RelayConfig} fields that have a fixed one. */
export const DEFAULT_RELAY_CONFIG = Object.freeze({
  /** Rows claimed per round. */
  batchSize: 100,
  /** Wait between rounds that found less than a batch. */
  pollInterval: '500ms',
  /** How long a claimed row is the relay's. */
  lease: '30s',
  /** First wait after a failed round. */
  minBackoff: '200ms',
  /** Longest wait between failed rounds. */
  maxBackoff: '30s',
  /** A publish unconfirmed this long counts as failed. */
  publishTimeout: '30s',
  /** Sent rows are kept a day. */
  retention: '1d',
  /** Sent rows past retention are deleted every minute. */
  cleanupEvery: '1m',
  /** PostgreSQL: wake on the outbox's NOTIFY. */
  listen: true,
} as const);

export interface ResolvedRelayConfig {
  readonly batchSize: number;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly minBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly publishTimeoutMs: number;
  readonly retentionMs: number;
  readonly cleanupEveryMs: number;
  readonly listen: boolean;
  readonly owner: string;
  readonly faults: RelayFaults | undefined;
  readonly logger: Logger;
}

/** Checks a relay's configuration at start-up. */
export function resolveRelayConfig<Tx>(config: RelayConfig<Tx>): ResolvedRelayConfig {
  const d = DEFAULT_RELAY_CONFIG;
  const ms = (value: Duration | undefined, fallback: Duration, field: string, min = 1): number => {
    const parsed = parseDuration(value ?? fallback, field);
    if (parsed < min) throw new ConfigError(field, `must be at least ${min}ms, got ${parsed}ms`);
    return parsed;
  };
  const batchSize = config.batchSize ?? d.batchSize;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 1000) {
    throw new ConfigError('batchSize', `must be a whole number from 1 to 1000, got ${batchSize}`);
  }
  const minBackoffMs = ms(config.minBackoff, d.minBackoff, 'minBackoff');
  const maxBackoffMs = ms(config.maxBackoff, d.maxBackoff, 'maxBackoff');
  if (maxBackoffMs < minBackoffMs) {
    throw new ConfigError('maxBackoff', `${maxBackoffMs}ms is shorter than minBackoff ${minBackoffMs}ms`);
  }
  const name = config.name ?? `${hostname()}-${process.pid}`;
  if (typeof name !== 'string' || name === '' || name.length > 40) {
    throw new ConfigError('name', 'must be a string of 1 to 40 characters');
  }
  return Object.freeze({
    batchSize,
    pollIntervalMs: ms(config.pollInterval, d.pollInterval, 'pollInterval'),
    leaseMs: ms(config.lease, d.lease, 'lease', 10),
    minBackoffMs,
    maxBackoffMs,
    publishTimeoutMs: ms(config.publishTimeout, d.publishTimeout, 'publishTimeout'),
    retentionMs: ms(config.retention, d.retention, 'retention', 0),
    cleanupEveryMs: ms(config.cleanupEvery, d.cleanupEvery, 'cleanupEvery'),
    listen: config.listen ?? d.listen,
    owner: `${name}-${randomBytes(6).toString('hex')}`,
    faults: config.faults,
    logger: toLogger(config.logger),
  });
}
