import { randomUUID } from 'node:crypto';
import { ConfigError, LedgerUnavailableError, OncemqError } from '../../core/errors.js';
import { CLAIM_RACE_ATTEMPTS, decideExisting } from '../claim-decision.js';
import { lostEveryRound } from '../claim-round.js';
import type { Claim, ClaimRequest, ClaimResult, LedgerRecord } from '../ledger.js';
import type { LedgerBackend, LeasedClaims } from '../ledger-backend.js';
import { unreachableLedger } from '../ledger-errors.js';
import { batchingOptions, perKey, RedisBatcher } from './redis-batch.js';
import { CallDeadlines, replyText, type RedisLike } from './redis-like.js';
import { decodeRecord, encodeRecord, redisKey, type StoredRecord } from './redis-record.js';
import { REDIS_SCRIPTS, type RedisScript } from './redis-scripts.js';
import { ownerToken } from '../owner-token.js';

/** What the Redis backend is built from: the ledger's configuration, checked. */
export interface RedisBackendSettings {
  readonly redis: RedisLike;
  readonly prefix: string;
  readonly retentionMs: number;
  readonly timeoutMs: number;
  readonly clock: () => number;
  readonly batch: boolean | undefined;
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

/**
 * The Redis ledger's backend: leased claims only. A claim is one `SET key value PX ttl NX GET`;
 * renew, complete, fail and release are Lua scripts that check owner and attempt.
 */
export class RedisBackend implements LedgerBackend<never>, LeasedClaims {
  readonly name = 'redis';
  readonly retentionMs: number;
  readonly leased = this;

  readonly #redis: RedisLike;
  readonly #prefix: string;
  readonly #clock: () => number;
  /** Redis before 7.0 refuses `SET … NX GET`; the claim then takes two round trips. */
  #setGet = true;
  readonly #claims: RedisBatcher<ClaimCall, string | null>;
  readonly #completions: RedisBatcher<CompleteCall, number>;
  readonly #deadlines: CallDeadlines;
  /** Claims this ledger handed out, by the very object it returned (a renewal returns a new one). */
  readonly #written = new WeakMap<Claim, Written>();

  constructor(settings: RedisBackendSettings) {
    this.#redis = settings.redis;
    this.#prefix = settings.prefix;
    this.retentionMs = settings.retentionMs;
    this.#clock = settings.clock;
    this.#deadlines = new CallDeadlines(settings.timeoutMs);
    const batching = batchingOptions(settings.batch, this.#redis);
    this.#claims = new RedisBatcher(
      (call) => this.#call(this.#redis.setNxGet(call.key, call.value, call.ttlMs), 'claiming'),
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

  /** Whether concurrent claims and completions are sent as batches. */
  get batching(): boolean {
    return this.#claims.enabled && this.#completions.enabled;
  }

  /**
   * Proves on the live server that the client really sends `NX`: sets a probe key, then checks that a
   * second `SET NX` is refused. A client that dropped the option would disable deduplication silently.
   */
  async open(): Promise<void> {
    const probe = `${this.#prefix}:probe:{${randomUUID()}}`;
    const redis = this.#redis;
    try {
      let first: boolean;
      let second: boolean;
      try {
        first = (await this.#call(redis.setNxGet(probe, '1', 10_000), 'SET NX GET')) === null;
        second = (await this.#call(redis.setNxGet(probe, '2', 10_000), 'SET NX GET')) === null;
      } catch (error) {
        if (!/syntax/i.test(String((error as OncemqError).cause ?? error))) throw error;
        this.#setGet = false;
        first = await this.#call(redis.setNx(probe, '1', 10_000), 'SET NX');
        second = await this.#call(redis.setNx(probe, '2', 10_000), 'SET NX');
      }
      const stored = await this.#call(redis.get(probe), 'GET');
      if (!first || second || stored !== '1') {
        throw new ConfigError(
          'client',
          `the ${redis.client} client did not honour SET NX (a second SET NX on one key was not refused); ` +
            'deduplication would be silently off: pass the client through fromNodeRedis() or fromIoredis()',
        );
      }
    } catch (error) {
      if (error instanceof ConfigError) throw error;
      const state = redis.connection?.();
      throw unreachableLedger('Redis', state?.url, error, state?.ready === false) ?? error;
    } finally {
      // Bounded too: a client that cannot reach its server may hold a command for ever.
      await this.#call(redis.del(probe), 'DEL').catch(() => undefined);
    }
  }

  /** The client stays open: it is the caller's. */
  close(): Promise<void> {
    return Promise.resolve();
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
    return redisKey(this.#prefix, group, key);
  }

  /** A PROCESSING key outlives its lease by the retention, so a crashed claim is reclaimed (attempt + 1), not forgotten. */
  #processingTtl(leaseMs: number): number {
    return Math.ceil(leaseMs) + this.retentionMs;
  }

  async #claimMany(calls: readonly ClaimCall[]): Promise<(string | null | Error)[]> {
    const keys = calls.map((call) => call.key);
    const args: string[] = [];
    for (const call of calls) args.push(call.value, String(call.ttlMs));
    const reply = await this.#call(REDIS_SCRIPTS.claimMany.run(this.#redis, keys, args), 'claiming');
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
    const reply = await this.#call(REDIS_SCRIPTS.complete.run(this.#redis, keys, args), 'completing');
    return perKey(reply, calls.length, 'completing', Number);
  }

  async #setOrGet(key: string, value: string, ttlMs: number): Promise<string | null> {
    if (this.#setGet) return this.#claims.run({ key, value, ttlMs });
    if (await this.#call(this.#redis.setNx(key, value, ttlMs), 'claiming')) return null;
    // Expired between the two commands: report it as a taken row that the next round retries.
    return (await this.#call(this.#redis.get(key), 'reading a claim')) ?? '';
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const key = this.#key(request.group, request.key);
    const ttl = this.#processingTtl(request.leaseMs);
    let record: LedgerRecord | undefined;
    for (let round = 0; round < CLAIM_RACE_ATTEMPTS; round++) {
      const now = this.#clock();
      const owner = ownerToken();
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
        REDIS_SCRIPTS.reclaim.run(this.#redis, [key], [existing, nextValue, String(ttl)]),
        'reclaiming',
      );
      if (taken === 1) {
        const reclaimed = { ...claim, attempt: next.a };
        this.#written.set(reclaimed, { record: next, value: nextValue });
        return { status: 'reclaimed', claim: reclaimed, previous: record };
      }
    }
    return lostEveryRound(request, record);
  }

  async #owned(claim: Claim, script: RedisScript, args: readonly string[], what: string): Promise<boolean> {
    const written = await this.#call(
      script.run(
        this.#redis,
        [this.#key(claim.group, claim.key)],
        [claim.owner, String(claim.attempt), ...args],
      ),
      what,
    );
    return written === 1;
  }

  async renew(claim: Claim, leaseMs: number): Promise<Date | undefined> {
    const now = this.#clock();
    const leaseUntil = now + leaseMs;
    const args = [String(leaseUntil), String(now), String(this.#processingTtl(leaseMs))];
    return (await this.#owned(claim, REDIS_SCRIPTS.renew, args, 'renewing a lease'))
      ? new Date(leaseUntil)
      : undefined;
  }

  async complete(claim: Claim, result: string | null): Promise<boolean> {
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
    return answer === 1;
  }

  fail(claim: Claim, remark: string): Promise<boolean> {
    const args = [String(this.#clock()), remark, String(this.retentionMs)];
    return this.#owned(claim, REDIS_SCRIPTS.fail, args, 'marking a failure');
  }

  release(claim: Claim): Promise<boolean> {
    return this.#owned(claim, REDIS_SCRIPTS.release, [], 'releasing');
  }

  async get(group: string, key: string): Promise<LedgerRecord | undefined> {
    const value = await this.#call(this.#redis.get(this.#key(group, key)), 'reading');
    return value === null ? undefined : decodeRecord(group, key, value);
  }
}
