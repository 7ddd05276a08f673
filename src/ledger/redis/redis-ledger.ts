import { randomUUID } from 'node:crypto';
import { formatDuration, parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError, LeaseLostError, LedgerUnavailableError, OncemqError } from '../../core/errors.js';
import { CLAIM_RACE_ATTEMPTS, decideExisting } from '../claim-decision.js';
import {
  DEFAULT_LEDGER_CAPABILITIES,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type Ledger,
  type LedgerCapabilities,
  type LedgerRecord,
  type PurgeResult,
} from '../ledger.js';
import { batchingOptions, perKey, RedisBatcher } from './redis-batch.js';
import {
  CallDeadlines,
  replyText,
  toRedisLike,
  type RedisClientInput,
  type RedisLike,
} from './redis-like.js';
import { decodeRecord, encodeRecord, redisKey, validatePrefix, type StoredRecord } from './redis-record.js';
import { REDIS_SCRIPTS, type RedisScript } from './redis-scripts.js';
import { MAX_REMARK_LENGTH } from '../ledger.js';

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
}

interface ClaimCall {
  readonly key: string;
  readonly value: string;
  readonly ttlMs: number;
}

interface CompleteCall {
  readonly key: string;
  readonly owner: string;
  readonly attempt: number;
  readonly result: string | null;
  /** The value the claim wrote, when this ledger made it and nothing renewed it since; else ''. */
  readonly expected: string;
  /** The finished record to store when the key still holds `expected` exactly; else ''. */
  readonly finished: string;
}

/** What a claim wrote, so its completion can compare the whole value instead of decoding it in Lua. */
interface Written {
  readonly record: StoredRecord;
  readonly value: string;
}

export const DEFAULT_REDIS_LEDGER_CONFIG = Object.freeze({
  prefix: 'oncemq',
  retention: '7d',
  timeout: '5s',
} as const);

/** Checks a Redis TTL from configuration: PX takes a whole, positive number of milliseconds. */
export function redisTtl(value: Duration, field: string): number {
  const ms = parseDuration(value, field);
  if (!Number.isSafeInteger(ms) || ms < 1) {
    throw new ConfigError(
      field,
      `the Redis TTL must be a whole number of milliseconds of at least 1ms, got ${String(value)}; ` +
        'a zero or fractional TTL would let Redis drop finished keys at once',
    );
  }
  return ms;
}

/**
 * Leased-mode ledger in Redis. A claim is one `SET key value PX ttl NX GET`: it takes the key or
 * returns the record already there, decided by {@link decideExisting} like every backend.
 * Renew, complete, fail and release are Lua scripts that check owner and attempt, so a stale owner
 * gets {@link LeaseLostError} and can never overwrite or delete another owner's claim.
 *
 * Limits (see docs/ledgers/redis.md): no transaction is shared with the business database, a key
 * lives only as long as its TTL (and only if Redis does not evict or lose it), and finished keys
 * are removed by their TTL (`purge` does nothing).
 */
export class RedisLedger implements Ledger<never> {
  readonly name = 'redis';
  readonly capabilities: LedgerCapabilities = Object.freeze({
    ...DEFAULT_LEDGER_CAPABILITIES,
    transactional: false,
    leased: true,
    storesResult: true,
    concurrentConnections: true,
    purge: false,
  });
  readonly retentionMs: number;
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly redis: RedisLike;

  readonly #clock: () => number;
  /** Redis before 7.0 refuses `SET … NX GET`; the claim then takes two round trips. */
  #setGet = true;
  #checked: Promise<void> | undefined;
  readonly #claims: RedisBatcher<ClaimCall, string | null>;
  readonly #completions: RedisBatcher<CompleteCall, number>;
  readonly #deadlines: CallDeadlines;
  /** Claims this ledger handed out, by the very object it returned (a renewal returns a new one). */
  readonly #written = new WeakMap<Claim, Written>();

  constructor(config: RedisLedgerConfig) {
    this.redis = toRedisLike(config.client);
    this.prefix = validatePrefix(config.prefix ?? DEFAULT_REDIS_LEDGER_CONFIG.prefix);
    this.retentionMs = redisTtl(config.retention ?? DEFAULT_REDIS_LEDGER_CONFIG.retention, 'retention');
    this.timeoutMs = redisTtl(config.timeout ?? DEFAULT_REDIS_LEDGER_CONFIG.timeout, 'timeout');
    this.#clock = config.clock ?? Date.now;
    this.#deadlines = new CallDeadlines(this.timeoutMs);
    const batching = batchingOptions(config.batch, this.redis);
    this.#claims = new RedisBatcher(
      (call) => this.#call(this.redis.setNxGet(call.key, call.value, call.ttlMs), 'claiming'),
      (calls) => this.#claimMany(calls),
      batching,
    );
    this.#completions = new RedisBatcher(
      async (call) => {
        const [answer] = await this.#completeMany([call]);
        if (answer instanceof Error) throw answer;
        return answer ?? 0;
      },
      (calls) => this.#completeMany(calls),
      batching,
    );
  }

  /** Whether concurrent claims and completions are sent as batches (see {@link RedisLedgerConfig.batch}). */
  get batching(): boolean {
    return this.#claims.enabled && this.#completions.enabled;
  }

  /**
   * Proves on the live server that the client really sends `NX`: sets a probe key, then checks that a
   * second `SET NX` is refused. A client that dropped the option would disable deduplication silently.
   */
  init(): Promise<void> {
    this.#checked ??= this.#selfCheck().catch((error: unknown) => {
      this.#checked = undefined;
      throw error;
    });
    return this.#checked;
  }

  async #selfCheck(): Promise<void> {
    const probe = `${this.prefix}:probe:{${randomUUID()}}`;
    try {
      let first: boolean;
      let second: boolean;
      try {
        first = (await this.#call(this.redis.setNxGet(probe, '1', 10_000), 'SET NX GET')) === null;
        second = (await this.#call(this.redis.setNxGet(probe, '2', 10_000), 'SET NX GET')) === null;
      } catch (error) {
        if (!/syntax/i.test(String((error as OncemqError).cause ?? error))) throw error;
        this.#setGet = false;
        first = await this.#call(this.redis.setNx(probe, '1', 10_000), 'SET NX');
        second = await this.#call(this.redis.setNx(probe, '2', 10_000), 'SET NX');
      }
      const stored = await this.#call(this.redis.get(probe), 'GET');
      if (!first || second || stored !== '1') {
        throw new ConfigError(
          'client',
          `the ${this.redis.client} client did not honour SET NX (a second SET NX on one key was not refused); ` +
            'deduplication would be silently off: pass the client through fromNodeRedis() or fromIoredis()',
        );
      }
    } finally {
      await this.redis.del(probe).catch(() => undefined);
    }
  }

  /** Runs one Redis call with the timeout, wrapping driver errors. */
  async #call<T>(promise: Promise<T>, what: string): Promise<T> {
    try {
      return await this.#deadlines.run(promise, what);
    } catch (error) {
      if (error instanceof OncemqError) throw error;
      throw new LedgerUnavailableError(`Redis ledger failed ${what}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  #key(group: string, key: string): string {
    return redisKey(this.prefix, group, key);
  }

  /** A PROCESSING key outlives its lease by the retention, so a crashed claim is reclaimed (attempt + 1), not forgotten. */
  #processingTtl(leaseMs: number): number {
    return Math.ceil(leaseMs) + this.retentionMs;
  }

  async #claimMany(calls: readonly ClaimCall[]): Promise<(string | null | Error)[]> {
    const keys = calls.map((call) => call.key);
    const args: string[] = [];
    for (const call of calls) args.push(call.value, String(call.ttlMs));
    const reply = await this.#call(REDIS_SCRIPTS.claimMany.run(this.redis, keys, args), 'claiming');
    return perKey(reply, calls.length, 'claiming', (answer) => (answer === 1 ? null : replyText(answer)));
  }

  async #completeMany(calls: readonly CompleteCall[]): Promise<(number | Error)[]> {
    const keys = calls.map((call) => call.key);
    const args = [String(this.#clock()), String(this.retentionMs)];
    for (const call of calls) {
      args.push(
        call.owner,
        String(call.attempt),
        call.result === null ? '0' : '1',
        call.result ?? '',
        call.expected,
        call.finished,
      );
    }
    const reply = await this.#call(REDIS_SCRIPTS.complete.run(this.redis, keys, args), 'completing');
    return perKey(reply, calls.length, 'completing', Number);
  }

  async #setOrGet(key: string, value: string, ttlMs: number): Promise<string | null> {
    if (this.#setGet) return this.#claims.run({ key, value, ttlMs });
    if (await this.#call(this.redis.setNx(key, value, ttlMs), 'claiming')) return null;
    // Expired between the two commands: report it as a taken row that the next round retries.
    return (await this.#call(this.redis.get(key), 'reading a claim')) ?? '';
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const key = this.#key(request.group, request.key);
    const ttl = this.#processingTtl(request.leaseMs);
    let record: LedgerRecord | undefined;
    for (let round = 0; round < CLAIM_RACE_ATTEMPTS; round++) {
      const now = this.#clock();
      const owner = randomUUID();
      const leaseUntil = now + request.leaseMs;
      const fresh: StoredRecord = {
        s: 'PROCESSING',
        o: owner,
        a: 1,
        l: leaseUntil,
        f: request.fingerprint,
        b: request.brokerId,
        t: request.topic,
        r: null,
        x: null,
        c: now,
        u: now,
      };
      const value = encodeRecord(fresh);
      const existing = await this.#setOrGet(key, value, ttl);
      const claim = { group: request.group, key: request.key, owner, leaseUntil: new Date(leaseUntil) };
      if (existing === null) {
        const acquired = { ...claim, attempt: 1 };
        this.#written.set(acquired, { record: fresh, value });
        return { status: 'acquired', claim: acquired };
      }
      if (existing === '') continue;
      record = decodeRecord(request.group, request.key, existing);
      const decision = decideExisting(record, request, now);
      if (decision !== 'reclaim') return { status: decision, record };
      const next: StoredRecord = {
        ...fresh,
        a: record.attempt + 1,
        f: record.fingerprint ?? request.fingerprint,
        c: record.createdAt.getTime(),
      };
      const nextValue = encodeRecord(next);
      const taken = await this.#call(
        REDIS_SCRIPTS.reclaim.run(this.redis, [key], [existing, nextValue, String(ttl)]),
        'reclaiming',
      );
      if (taken === 1) {
        const reclaimed = { ...claim, attempt: next.a };
        this.#written.set(reclaimed, { record: next, value: nextValue });
        return { status: 'reclaimed', claim: reclaimed, previous: record };
      }
    }
    if (record === undefined)
      throw new LedgerUnavailableError(`claim of ${request.key} kept racing with expiry`);
    return { status: 'busy', record };
  }

  async #owned(claim: Claim, script: RedisScript, args: readonly string[], what: string): Promise<void> {
    const written = await this.#call(
      script.run(
        this.redis,
        [this.#key(claim.group, claim.key)],
        [claim.owner, String(claim.attempt), ...args],
      ),
      what,
    );
    if (written !== 1) throw new LeaseLostError(claim.group, claim.key, claim.attempt);
  }

  async renew(claim: Claim, leaseMs: number): Promise<Claim> {
    const now = this.#clock();
    const leaseUntil = now + leaseMs;
    await this.#owned(
      claim,
      REDIS_SCRIPTS.renew,
      [String(leaseUntil), String(now), String(this.#processingTtl(leaseMs))],
      'renewing a lease',
    );
    return { ...claim, leaseUntil: new Date(leaseUntil) };
  }

  async complete(claim: Claim, result: string | null): Promise<void> {
    const written = this.#written.get(claim);
    let finished = '';
    if (written !== undefined) {
      this.#written.delete(claim);
      finished = encodeRecord({
        ...written.record,
        s: 'SUCCESS',
        l: null,
        r: null,
        x: result,
        u: this.#clock(),
      });
    }
    const answer = await this.#completions.run({
      key: this.#key(claim.group, claim.key),
      owner: claim.owner,
      attempt: claim.attempt,
      result,
      expected: written?.value ?? '',
      finished,
    });
    if (answer !== 1) throw new LeaseLostError(claim.group, claim.key, claim.attempt);
  }

  async fail(claim: Claim, remark: string): Promise<void> {
    await this.#owned(
      claim,
      REDIS_SCRIPTS.fail,
      [String(this.#clock()), remark.slice(0, MAX_REMARK_LENGTH), String(this.retentionMs)],
      'marking a failure',
    );
  }

  async release(claim: Claim): Promise<void> {
    await this.#owned(claim, REDIS_SCRIPTS.release, [], 'releasing');
  }

  async get(group: string, key: string): Promise<LedgerRecord | undefined> {
    const value = await this.#call(this.redis.get(this.#key(group, key)), 'reading');
    return value === null ? undefined : decodeRecord(group, key, value);
  }

  /** Redis shares no transaction with the handler: use mode 'leased' or the tiered ledger. */
  transaction(): Promise<ClaimResult> {
    return Promise.reject(
      new ConfigError(
        'mode',
        "the Redis ledger cannot share a transaction with the handler; use mode 'leased'",
      ),
    );
  }

  recordFailure(): Promise<void> {
    return this.transaction().then(() => undefined);
  }

  /** Nothing to do: every finished key carries the retention as its Redis TTL. */
  purge(): Promise<PurgeResult> {
    return Promise.resolve({ deleted: 0, batches: 0 });
  }

  /** Leaves the client open: it is the caller's. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  toString(): string {
    return `RedisLedger(${this.redis.client}, prefix '${this.prefix}', retention ${formatDuration(this.retentionMs)})`;
  }
}
