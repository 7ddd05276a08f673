import { formatDuration } from '../../core/duration.js';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { decideExisting } from '../claim-decision.js';
import type { ClaimRequest, ClaimResult, LedgerRecord } from '../ledger.js';
import { batchingOptions, perKey, RedisBatcher } from '../redis/redis-batch.js';
import { CallDeadlines, replyText, type RedisLike } from '../redis/redis-like.js';
import { decodeRecord, encodeRecord, redisKey, storedFrom } from '../redis/redis-record.js';
import { REDIS_SCRIPTS } from '../redis/redis-scripts.js';
import { CircuitBreaker } from './circuit-breaker.js';

/** Counters of the Redis tier, for metrics and tests. */
export interface TieredCacheMetrics {
  /** Claims answered from Redis (duplicate or conflict) without touching SQL. */
  readonly hits: number;
  /** Claims Redis could not answer, sent to the SQL ledger. */
  readonly misses: number;
  /** Completed keys written to Redis after their SQL commit (including backfills). */
  readonly writes: number;
  /** Cache reads that failed or timed out; the claim went to SQL. */
  readonly readFailures: number;
  /** Cache writes that failed or timed out; the key is answered by SQL until written again. */
  readonly writeFailures: number;
  /** Reads and writes skipped because the breaker was open (Redis recently failed). */
  readonly skipped: number;
  /** Times Redis was taken out of the path after a failure. */
  readonly breakerOpens: number;
}

/** How the cache reaches Redis. */
export interface TieredCacheSettings {
  readonly redis: RedisLike;
  readonly prefix: string;
  readonly cacheTtlMs: number;
  readonly timeoutMs: number;
  readonly retryAfterMs: number;
  readonly batch: boolean | undefined;
  readonly logger: Logger;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * The Redis tier of the tiered ledger: completed keys, answered as duplicates (or conflicts) without
 * SQL. Never fatal: a failing Redis is taken out of the path by a circuit breaker for `retryAfter`.
 */
export class TieredCache {
  readonly #settings: TieredCacheSettings;
  readonly #deadlines: CallDeadlines;
  readonly #reads: RedisBatcher<string, string | null>;
  readonly #breaker: CircuitBreaker;
  readonly #metrics: Mutable<Omit<TieredCacheMetrics, 'breakerOpens'>> = {
    hits: 0,
    misses: 0,
    writes: 0,
    readFailures: 0,
    writeFailures: 0,
    skipped: 0,
  };

  constructor(settings: TieredCacheSettings) {
    this.#settings = settings;
    const redis = settings.redis;
    this.#deadlines = new CallDeadlines(settings.timeoutMs);
    this.#reads = new RedisBatcher(
      (key) => this.#deadlines.run(redis.get(key), 'GET'),
      async (keys) =>
        perKey(
          await this.#deadlines.run(REDIS_SCRIPTS.getMany.run(redis, keys, []), 'GET'),
          keys.length,
          'reading',
          (answer) => (answer === 0 ? null : replyText(answer)),
        ),
      batchingOptions(settings.batch, redis),
    );
    this.#breaker = new CircuitBreaker(settings.retryAfterMs);
  }

  metrics(): TieredCacheMetrics {
    return { ...this.#metrics, breakerOpens: this.#breaker.timesOpened };
  }

  #failed(error: unknown, what: 'read' | 'write', request: { group: string; key: string }): void {
    if (what === 'read') this.#metrics.readFailures++;
    else this.#metrics.writeFailures++;
    const wasOpen = this.#breaker.isOpen;
    this.#breaker.failure();
    this.#settings.logger.warn(
      `oncemq: Redis cache ${what} failed; using the SQL ledger alone for ${formatDuration(this.#breaker.retryAfterMs)}`,
      { group: request.group, key: request.key, alreadyDown: wasOpen, error: errorText(error) },
    );
  }

  /** A completed key held by Redis, decided like any existing row; `undefined` sends the claim to SQL. */
  async answer(request: ClaimRequest): Promise<ClaimResult | undefined> {
    if (!this.#breaker.allows()) {
      this.#metrics.skipped++;
      this.#metrics.misses++;
      return undefined;
    }
    let value: string | null;
    try {
      value = await this.#reads.run(redisKey(this.#settings.prefix, request.group, request.key));
      this.#breaker.success();
    } catch (error) {
      this.#failed(error, 'read', request);
      this.#metrics.misses++;
      return undefined;
    }
    if (value !== null) {
      let record: LedgerRecord | undefined;
      try {
        record = decodeRecord(request.group, request.key, value);
      } catch (error) {
        this.#settings.logger.warn('oncemq: unreadable value in the Redis cache; asking the SQL ledger', {
          group: request.group,
          key: request.key,
          error: errorText(error),
        });
      }
      if (record?.status === 'SUCCESS') {
        const decision = decideExisting(record, request, Date.now());
        if (decision === 'duplicate' || decision === 'conflict') {
          this.#metrics.hits++;
          return { status: decision, record };
        }
      }
    }
    this.#metrics.misses++;
    return undefined;
  }

  /** Writes a completed key to Redis. Only ever called after the SQL ledger committed it. */
  async remember(record: LedgerRecord): Promise<void> {
    if (record.status !== 'SUCCESS') return;
    if (!this.#breaker.allows()) {
      this.#metrics.skipped++;
      return;
    }
    try {
      const key = redisKey(this.#settings.prefix, record.group, record.key);
      await this.#deadlines.run(
        this.#settings.redis.setPx(key, encodeRecord(storedFrom(record)), this.#settings.cacheTtlMs),
        'SET',
      );
      this.#breaker.success();
      this.#metrics.writes++;
    } catch (error) {
      this.#failed(error, 'write', record);
    }
  }
}
