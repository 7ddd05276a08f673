import { formatDuration, parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError, errorText } from '../../core/errors.js';
import { SILENT_LOGGER, type Logger } from '../../core/logger.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { decideExisting } from '../claim-decision.js';
import {
  isWon,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type Ledger,
  type LedgerCapabilities,
  type LedgerRecord,
  type PurgeOptions,
  type PurgeResult,
  type TransactionWork,
} from '../ledger.js';
import { batchingOptions, perKey, RedisBatcher } from '../redis/redis-batch.js';
import { redisTtl } from '../redis/redis-ledger.js';
import {
  CallDeadlines,
  replyText,
  toRedisLike,
  type RedisClientInput,
  type RedisLike,
} from '../redis/redis-like.js';
import { decodeRecord, encodeRecord, redisKey, storedFrom, validatePrefix } from '../redis/redis-record.js';
import { REDIS_SCRIPTS } from '../redis/redis-scripts.js';

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
  /** Where Redis failures are reported (never fatal). @default silent */
  readonly logger?: Logger;
}

export const DEFAULT_TIERED_LEDGER_CONFIG = Object.freeze({
  prefix: 'oncemq-cache',
  cacheTtl: '1d',
  timeout: '200ms',
  retryAfter: '5s',
} as const);

/** Counters of the Redis tier, for metrics and tests. */
export interface TieredCacheMetrics {
  /** Claims answered from Redis (duplicate or conflict) without touching SQL. */
  readonly hits: number;
  /** Claims Redis could not answer, sent to the SQL ledger. */
  readonly misses: number;
  /** Completed keys written to Redis after their SQL commit (including backfills). */
  readonly writes: number;
  readonly readFailures: number;
  readonly writeFailures: number;
  /** Reads and writes skipped because the breaker was open (Redis recently failed). */
  readonly skipped: number;
  /** Times Redis was taken out of the path after a failure. */
  readonly breakerOpens: number;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * Redis in front of a SQL ledger. The SQL ledger is the truth: every claim Redis cannot answer is
 * decided by the SQL ledger's own claim (transactional mode keeps its transaction), and a completed
 * key is written to Redis only after its SQL commit. Redis answers only `duplicate` (or `conflict`)
 * for keys it holds as completed; if it is down, slow or flushed, the ledger runs on SQL alone
 * (a circuit breaker keeps it out of the path for `retryAfter`, then probes it again).
 */
export class TieredLedger<Tx = unknown> implements Ledger<Tx> {
  readonly name: string;
  readonly capabilities: LedgerCapabilities;
  readonly retentionMs: number;
  readonly prefix: string;
  readonly cacheTtlMs: number;
  readonly timeoutMs: number;
  readonly sql: Ledger<Tx>;
  readonly redis: RedisLike;

  readonly #deadlines: CallDeadlines;
  readonly #reads: RedisBatcher<string, string | null>;
  readonly #breaker: CircuitBreaker;
  readonly #logger: Logger;
  readonly #metrics: Mutable<Omit<TieredCacheMetrics, 'breakerOpens'>> = {
    hits: 0,
    misses: 0,
    writes: 0,
    readFailures: 0,
    writeFailures: 0,
    skipped: 0,
  };

  constructor(config: TieredLedgerConfig<Tx>) {
    const sql = config.ledger as Ledger<Tx> | undefined;
    if (sql?.capabilities.transactional !== true) {
      throw new ConfigError(
        'ledger',
        'the tiered ledger needs a transactional SQL ledger behind Redis (SqliteLedger, PostgresLedger)',
      );
    }
    this.sql = sql;
    this.redis = toRedisLike(config.redis, 'redis');
    this.prefix = validatePrefix(config.prefix ?? DEFAULT_TIERED_LEDGER_CONFIG.prefix);
    this.cacheTtlMs = redisTtl(config.cacheTtl ?? DEFAULT_TIERED_LEDGER_CONFIG.cacheTtl, 'cacheTtl');
    this.timeoutMs = redisTtl(config.timeout ?? DEFAULT_TIERED_LEDGER_CONFIG.timeout, 'timeout');
    this.#deadlines = new CallDeadlines(this.timeoutMs);
    this.#reads = new RedisBatcher(
      (key) => this.#deadlines.run(this.redis.get(key), 'GET'),
      async (keys) =>
        perKey(
          await this.#deadlines.run(REDIS_SCRIPTS.getMany.run(this.redis, keys, []), 'GET'),
          keys.length,
          'reading',
          (answer) => (answer === 0 ? null : replyText(answer)),
        ),
      batchingOptions(config.batch, this.redis),
    );
    const retryAfterMs = parseDuration(
      config.retryAfter ?? DEFAULT_TIERED_LEDGER_CONFIG.retryAfter,
      'retryAfter',
    );
    this.#breaker = new CircuitBreaker(retryAfterMs);
    this.#logger = config.logger ?? SILENT_LOGGER;
    this.name = `tiered(${sql.name})`;
    this.retentionMs = sql.retentionMs;
    this.capabilities = Object.freeze({ ...sql.capabilities, batchClaim: false, inspect: false });
  }

  cacheMetrics(): TieredCacheMetrics {
    return { ...this.#metrics, breakerOpens: this.#breaker.timesOpened };
  }

  init(): Promise<void> {
    return this.sql.init();
  }

  #redisFailed(error: unknown, what: 'read' | 'write', request: { group: string; key: string }): void {
    if (what === 'read') this.#metrics.readFailures++;
    else this.#metrics.writeFailures++;
    const wasOpen = this.#breaker.isOpen;
    this.#breaker.failure();
    this.#logger.warn(
      `oncemq: Redis cache ${what} failed; using the SQL ledger alone for ${formatDuration(this.#breaker.retryAfterMs)}`,
      {
        group: request.group,
        key: request.key,
        alreadyDown: wasOpen,
        error: errorText(error),
      },
    );
  }

  /** A completed key held by Redis, decided like any existing row; `undefined` sends the claim to SQL. */
  async #fromCache(request: ClaimRequest): Promise<ClaimResult | undefined> {
    if (!this.#breaker.allows()) {
      this.#metrics.skipped++;
      this.#metrics.misses++;
      return undefined;
    }
    let value: string | null;
    try {
      value = await this.#reads.run(redisKey(this.prefix, request.group, request.key));
      this.#breaker.success();
    } catch (error) {
      this.#redisFailed(error, 'read', request);
      this.#metrics.misses++;
      return undefined;
    }
    if (value !== null) {
      let record: LedgerRecord | undefined;
      try {
        record = decodeRecord(request.group, request.key, value);
      } catch (error) {
        this.#logger.warn('oncemq: unreadable value in the Redis cache; asking the SQL ledger', {
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
  async #remember(record: LedgerRecord): Promise<void> {
    if (record.status !== 'SUCCESS') return;
    if (!this.#breaker.allows()) {
      this.#metrics.skipped++;
      return;
    }
    try {
      const key = redisKey(this.prefix, record.group, record.key);
      await this.#deadlines.run(
        this.redis.setPx(key, encodeRecord(storedFrom(record)), this.cacheTtlMs),
        'SET',
      );
      this.#breaker.success();
      this.#metrics.writes++;
    } catch (error) {
      this.#redisFailed(error, 'write', record);
    }
  }

  async transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult> {
    const cached = await this.#fromCache(request);
    if (cached !== undefined) return cached;
    let stored: string | null = null;
    const result = await this.sql.transaction(request, async (tx, claim) => {
      stored = await work(tx, claim);
      return stored;
    });
    // The SQL transaction has committed (or answered without claiming) before Redis is written.
    if (isWon(result)) {
      await this.#remember(this.#completed(request, result, stored));
    } else if (result.status === 'duplicate') {
      await this.#remember(result.record);
    }
    return result;
  }

  #completed(
    request: ClaimRequest,
    result: Extract<ClaimResult, { status: 'acquired' | 'reclaimed' }>,
    stored: string | null,
  ): LedgerRecord {
    const now = new Date();
    const previous = result.status === 'reclaimed' ? result.previous : undefined;
    return {
      group: request.group,
      key: request.key,
      status: 'SUCCESS',
      fingerprint: previous?.fingerprint ?? request.fingerprint,
      owner: result.claim.owner,
      attempt: result.claim.attempt,
      leaseUntil: null,
      brokerId: request.brokerId,
      topic: request.topic,
      remark: null,
      result: stored,
      createdAt: previous?.createdAt ?? now,
      updatedAt: now,
    };
  }

  recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    return this.sql.recordFailure(request, remark);
  }

  /** Leased mode: Redis answers completed keys; the claim itself is the SQL ledger's. */
  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const cached = await this.#fromCache(request);
    if (cached !== undefined) return cached;
    const result = await this.sql.claim(request);
    if (result.status === 'duplicate') await this.#remember(result.record);
    return result;
  }

  renew(claim: Claim, leaseMs: number): Promise<Claim> {
    return this.sql.renew(claim, leaseMs);
  }

  /** Completes in SQL; the key reaches Redis at its first duplicate (leased claims do not carry the record). */
  complete(claim: Claim, result: string | null): Promise<void> {
    return this.sql.complete(claim, result);
  }

  fail(claim: Claim, remark: string): Promise<void> {
    return this.sql.fail(claim, remark);
  }

  release(claim: Claim): Promise<void> {
    return this.sql.release(claim);
  }

  /** The SQL ledger's row: the truth. */
  get(group: string, key: string): Promise<LedgerRecord | undefined> {
    return this.sql.get(group, key);
  }

  purge(options: PurgeOptions): Promise<PurgeResult> {
    return this.sql.purge(options);
  }

  /** Closes the SQL ledger; the Redis client stays open (it is the caller's). */
  close(): Promise<void> {
    return this.sql.close();
  }
}
