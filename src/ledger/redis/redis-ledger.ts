import { formatDuration, type Duration } from '../../core/duration.js';
import type { LoggerLike } from '../../core/logger.js';
import { RuntimeLedger } from '../runtime-ledger.js';
import { RedisBackend } from './redis-backend.js';
import { toRedisLike, type RedisClientInput, type RedisLike } from './redis-like.js';
import { redisTtl, validatePrefix } from './redis-record.js';

/** Input of `new RedisLedger(config)`: the client, and how keys are named and kept. */
export interface RedisLedgerConfig {
  /**
   * A connected node-redis v5+ client, an ioredis v5+ client, or a {@link RedisLike} adapter
   * (`fromNodeRedis(client)`, `fromIoredis(client)`). The client stays the caller's: close() leaves it open.
   */
  readonly client: RedisClientInput;
  /** First part of every key: `<prefix>:<group>:{<key>}`. No braces. @default 'oncemq' */
  readonly prefix?: string;
  /**
   * How long a finished key (SUCCESS or FAIL) lives: its Redis TTL. Must outlast the redelivery
   * horizon (the pipeline checks it at start-up). @default '7d'
   */
  readonly retention?: Duration;
  /** Longest wait for one Redis command before the operation fails as unavailable. @default '5s' */
  readonly timeout?: Duration;
  /** Clock in epoch milliseconds, for leases and timestamps. @default Date.now */
  readonly clock?: () => number;
  /**
   * Send the claims, and the completions, that concurrent deliveries make in the same event-loop
   * turn as one script call each (up to 128 keys), instead of one command per key. Every key keeps
   * its own atomic step; only the round trip is shared. Off by itself on Redis Cluster clients.
   * @default true
   */
  readonly batch?: boolean;
  /**
   * Where the ledger reports that it is ready or closed.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Defaults of the {@link RedisLedgerConfig} fields that have a fixed one. */
export const DEFAULT_REDIS_LEDGER_CONFIG = Object.freeze({
  /** First part of every key. */
  prefix: 'oncemq',
  /** A finished key's TTL: a week, well past the default redelivery horizon. */
  retention: '7d',
  /** Longest wait for one Redis command. */
  timeout: '5s',
} as const);

/**
 * Leased-mode ledger in Redis. A claim is one `SET key value PX ttl NX GET`: it takes the key or
 * returns the record already there, decided by `decideExisting` like every backend.
 * Renew, complete, fail and release are Lua scripts that check owner and attempt, so a stale owner
 * gets LeaseLostError and can never overwrite or delete another owner's claim.
 *
 * Limits (see docs/ledgers/redis.md): no transaction is shared with the business database, a key
 * lives only as long as its TTL (and only if Redis does not evict or lose it), and finished keys
 * are removed by their TTL (no purge).
 */
export class RedisLedger extends RuntimeLedger<never> {
  /** First part of every key, checked. */
  readonly prefix: string;
  /** Longest wait for one Redis command, in milliseconds. */
  readonly timeoutMs: number;
  /** The client, adapted to the commands the ledger sends. */
  readonly redis: RedisLike;

  readonly #backend: RedisBackend;

  constructor(config: RedisLedgerConfig) {
    const redis = toRedisLike(config.client);
    const prefix = validatePrefix(config.prefix ?? DEFAULT_REDIS_LEDGER_CONFIG.prefix);
    const timeoutMs = redisTtl(config.timeout ?? DEFAULT_REDIS_LEDGER_CONFIG.timeout, 'timeout');
    const backend = new RedisBackend({
      redis,
      prefix,
      retentionMs: redisTtl(config.retention ?? DEFAULT_REDIS_LEDGER_CONFIG.retention, 'retention'),
      timeoutMs,
      clock: config.clock ?? Date.now,
      batch: config.batch,
    });
    super(backend, { logger: config.logger });
    this.redis = redis;
    this.prefix = prefix;
    this.timeoutMs = timeoutMs;
    this.#backend = backend;
  }

  /** Whether concurrent claims and completions are sent as batches (see {@link RedisLedgerConfig.batch}). */
  get batching(): boolean {
    return this.#backend.batching;
  }

  override toString(): string {
    return `RedisLedger(${this.redis.client}, prefix '${this.prefix}', retention ${formatDuration(this.retentionMs)})`;
  }
}
