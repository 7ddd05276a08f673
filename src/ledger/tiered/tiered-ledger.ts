import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { toLogger, type LoggerLike } from '../../core/logger.js';
import type { Ledger } from '../ledger.js';
import { toRedisLike, type RedisClientInput, type RedisLike } from '../redis/redis-like.js';
import { redisTtl, validatePrefix } from '../redis/redis-record.js';
import { RuntimeLedger } from '../runtime-ledger.js';
import { TieredBackend } from './tiered-backend.js';
import { TieredCache, type TieredCacheMetrics } from './tiered-cache.js';

export type { TieredCacheMetrics } from './tiered-cache.js';

/** Input of `new TieredLedger(config)`: the SQL ledger of record and the Redis client in front of it. */
export interface TieredLedgerConfig<Tx> {
  /** The ledger of record: a transactional SQL ledger (SqliteLedger, PostgresLedger…). */
  readonly ledger: Ledger<Tx>;
  /** node-redis v5+ or ioredis v5+ client, or a RedisLike adapter. Stays the caller's. */
  readonly redis: RedisClientInput;
  /** First part of every cache key: `<prefix>:<group>:{<key>}`. @default 'oncemq-cache' */
  readonly prefix?: string;
  /** How long a completed key stays in Redis. A miss only costs a SQL round trip. @default '1d' */
  readonly cacheTtl?: Duration;
  /** Longest wait for one Redis command; a slower Redis counts as down. @default '200ms' */
  readonly timeout?: Duration;
  /**
   * Send the cache reads that concurrent deliveries make in one event-loop turn as one script call
   * (as the Redis ledger batches its claims). Off by itself on Redis Cluster clients. @default true
   */
  readonly batch?: boolean;
  /** After a Redis failure, how long to go to SQL alone before trying Redis again. @default '5s' */
  readonly retryAfter?: Duration;
  /**
   * Where Redis failures are reported (never fatal), and the ledger's start and close.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Defaults of the {@link TieredLedgerConfig} fields that have a fixed one. */
export const DEFAULT_TIERED_LEDGER_CONFIG = Object.freeze({
  /** First part of every cache key. */
  prefix: 'oncemq-cache',
  /** A completed key stays in Redis a day. */
  cacheTtl: '1d',
  /** A Redis command slower than this counts as Redis down. */
  timeout: '200ms',
  /** SQL alone for this long after a Redis failure. */
  retryAfter: '5s',
} as const);

/**
 * Redis in front of a SQL ledger. The SQL ledger is the truth: every claim Redis cannot answer is
 * decided by the SQL ledger's own claim (transactional mode keeps its transaction), and a completed
 * key is written to Redis only after its SQL commit. Redis answers only `duplicate` (or `conflict`)
 * for keys it holds as completed; if it is down, slow or flushed, the ledger runs on SQL alone
 * (a circuit breaker keeps it out of the path for `retryAfter`, then probes it again).
 */
export class TieredLedger<Tx = unknown> extends RuntimeLedger<Tx> {
  /** First part of every cache key, checked. */
  readonly prefix: string;
  /** How long a completed key stays in Redis, in milliseconds. */
  readonly cacheTtlMs: number;
  /** Longest wait for one Redis command, in milliseconds. */
  readonly timeoutMs: number;
  /** The SQL ledger of record behind the cache. */
  readonly sql: Ledger<Tx>;
  /** The Redis client, adapted. */
  readonly redis: RedisLike;

  readonly #cache: TieredCache;

  constructor(config: TieredLedgerConfig<Tx>) {
    const sql = config.ledger as Ledger<Tx> | undefined;
    if (sql?.capabilities.transactional !== true) {
      throw new ConfigError(
        'ledger',
        'the tiered ledger needs a transactional SQL ledger behind Redis (SqliteLedger, PostgresLedger)',
      );
    }
    const redis = toRedisLike(config.redis, 'redis');
    const prefix = validatePrefix(config.prefix ?? DEFAULT_TIERED_LEDGER_CONFIG.prefix);
    const cacheTtlMs = redisTtl(config.cacheTtl ?? DEFAULT_TIERED_LEDGER_CONFIG.cacheTtl, 'cacheTtl');
    const timeoutMs = redisTtl(config.timeout ?? DEFAULT_TIERED_LEDGER_CONFIG.timeout, 'timeout');
    const logger = toLogger(config.logger);
    const cache = new TieredCache({
      redis,
      prefix,
      cacheTtlMs,
      timeoutMs,
      retryAfterMs: parseDuration(config.retryAfter ?? DEFAULT_TIERED_LEDGER_CONFIG.retryAfter, 'retryAfter'),
      batch: config.batch,
      logger,
    });
    super(new TieredBackend(sql, cache), { logger });
    this.sql = sql;
    this.redis = redis;
    this.prefix = prefix;
    this.cacheTtlMs = cacheTtlMs;
    this.timeoutMs = timeoutMs;
    this.#cache = cache;
  }

  /** A snapshot of the Redis tier's counters: hits, misses, writes, failures, breaker opens. */
  cacheMetrics(): TieredCacheMetrics {
    return this.#cache.metrics();
  }
}
