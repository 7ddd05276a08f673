import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, LeaseLostError, LedgerUnavailableError, type ClaimRequest } from 'oncemq';
import { RedisLedger, type RedisLike } from 'oncemq/redis';
import { redisKey, RedisScript } from '../support/internal.js';
import { counting } from '../support/counting.js';
import { findService } from '../support/services.js';
import { connectRedis, REDIS_CLIENT_KINDS, REDIS_SERVICE, type TestRedis } from '../support/redis.js';

const service = await findService(REDIS_SERVICE);

const request = (key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest => ({
  group: 'points',
  key,
  fingerprint: 'fp-1',
  brokerId: 'broker-1',
  topic: 'payments',
  leaseMs: 30_000,
  ...overrides,
});

describe.skipIf(!service.available)('RedisLedger', () => {
  describe.each(REDIS_CLIENT_KINDS)('with %s', (kind) => {
    let redis: TestRedis;
    let now: number;
    let ledger: RedisLedger;

    beforeEach(async () => {
      redis = await connectRedis(kind, service.url);
      now = Date.now();
      ledger = new RedisLedger({ client: redis.client, prefix: redis.prefix, clock: () => now });
      await ledger.init();
    });

    afterEach(async () => {
      await redis.close();
    });

    const key = (name: string): string => redisKey(redis.prefix, 'points', name);

    it('refuses a second SET NX on one key through the adapter', async () => {
      const k = key('probe');
      expect(await redis.redis.setNx(k, 'first', 10_000)).toBe(true);
      expect(await redis.redis.setNx(k, 'second', 10_000)).toBe(false);
      expect(await redis.redis.setNxGet(k, 'third', 10_000)).toBe('first');
      expect(await redis.redis.get(k)).toBe('first');
      expect(await redis.redis.setNxGet(key('probe-2'), 'fresh', 10_000)).toBeNull();
    });

    it('picks the adapter for the raw client by what it can do', () => {
      expect(ledger.redis.client).toBe(kind);
    });

    it('answers busy to a second claim while the first lease runs, then duplicate after completion with the result', async () => {
      const first = await ledger.claim(request('evt-1'));
      expect(first).toMatchObject({ status: 'acquired', claim: { attempt: 1 } });
      expect(await ledger.claim(request('evt-1', { brokerId: 'broker-2' }))).toMatchObject({
        status: 'busy',
        record: { status: 'PROCESSING', brokerId: 'broker-1' },
      });
      if (first.status !== 'acquired') throw new Error('unreachable');
      await ledger.complete(first.claim, '{"credited":100}');
      expect(await ledger.claim(request('evt-1'))).toMatchObject({
        status: 'duplicate',
        record: {
          status: 'SUCCESS',
          result: '{"credited":100}',
          fingerprint: 'fp-1',
          brokerId: 'broker-1',
          topic: 'payments',
          leaseUntil: null,
          attempt: 1,
        },
      });
    });

    it('answers conflict when the key comes back with another payload', async () => {
      const first = await ledger.claim(request('evt-1'));
      if (first.status !== 'acquired') throw new Error('expected acquired');
      await ledger.complete(first.claim, null);
      expect(await ledger.claim(request('evt-1', { fingerprint: 'fp-2' }))).toMatchObject({
        status: 'conflict',
        record: { fingerprint: 'fp-1' },
      });
    });

    it('gives a completed key the retention as TTL and a claim its lease plus the retention', async () => {
      const short = new RedisLedger({ client: redis.redis, prefix: redis.prefix, retention: '1h' });
      const claimed = await short.claim(request('evt-ttl', { leaseMs: 60_000 }));
      const pttl = (): Promise<unknown> =>
        redis.redis.eval("return redis.call('PTTL', KEYS[1])", [key('evt-ttl')], []);
      const processing = Number(await pttl());
      expect(processing).toBeGreaterThan(3_600_000);
      expect(processing).toBeLessThanOrEqual(3_660_000);
      if (claimed.status !== 'acquired') throw new Error('expected acquired');
      await short.complete(claimed.claim, null);
      const done = Number(await pttl());
      expect(done).toBeGreaterThan(3_500_000);
      expect(done).toBeLessThanOrEqual(3_600_000);
    });

    it('reclaims an expired lease with attempt + 1 and locks the stale owner out of every write', async () => {
      const first = await ledger.claim(request('evt-1', { leaseMs: 1_000 }));
      if (first.status !== 'acquired') throw new Error('expected acquired');
      now += 1_001;
      const second = await ledger.claim(request('evt-1', { brokerId: 'broker-2' }));
      expect(second).toMatchObject({
        status: 'reclaimed',
        claim: { attempt: 2 },
        previous: { owner: first.claim.owner, attempt: 1 },
      });
      await expect(ledger.complete(first.claim, 'stale')).rejects.toBeInstanceOf(LeaseLostError);
      await expect(ledger.release(first.claim)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(ledger.fail(first.claim, 'stale')).rejects.toBeInstanceOf(LeaseLostError);
      await expect(ledger.renew(first.claim, 1_000)).rejects.toBeInstanceOf(LeaseLostError);
      expect(await ledger.get('points', 'evt-1')).toMatchObject({
        status: 'PROCESSING',
        attempt: 2,
        brokerId: 'broker-2',
        createdAt: new Date(now - 1_001),
      });
    });

    it('refuses a release by an owner of the same attempt number but another token', async () => {
      const first = await ledger.claim(request('evt-1'));
      if (first.status !== 'acquired') throw new Error('expected acquired');
      await expect(ledger.release({ ...first.claim, owner: randomUUID() })).rejects.toBeInstanceOf(
        LeaseLostError,
      );
      expect(await ledger.get('points', 'evt-1')).toMatchObject({
        status: 'PROCESSING',
        owner: first.claim.owner,
      });
    });

    it('renews a lease so the key stays busy past the first deadline', async () => {
      const first = await ledger.claim(request('evt-1', { leaseMs: 1_000 }));
      if (first.status !== 'acquired') throw new Error('expected acquired');
      now += 900;
      const renewed = await ledger.renew(first.claim, 1_000);
      expect(renewed.leaseUntil).toEqual(new Date(now + 1_000));
      now += 500;
      expect(await ledger.claim(request('evt-1'))).toMatchObject({ status: 'busy' });
    });

    it('stores the same finished record whether the completion compares the whole value or checks it field by field', async () => {
      // Fast path: the claim object this ledger returned, nothing renewed since.
      const direct = await ledger.claim(request('evt-direct'));
      // Checked path: a renewal rewrote the value, so the completion must decode and check it.
      const renewedFirst = await ledger.claim(request('evt-renewed'));
      // Checked path too: a copy of the claim (as a caller that serialised it would hold).
      const copied = await ledger.claim(request('evt-copied'));
      if (direct.status !== 'acquired' || renewedFirst.status !== 'acquired' || copied.status !== 'acquired')
        throw new Error('expected acquired');
      now += 10;
      const renewed = await ledger.renew(renewedFirst.claim, 30_000);
      now += 10;
      await ledger.complete(direct.claim, '{"credited":100}');
      await ledger.complete(renewed, '{"credited":100}');
      await ledger.complete({ ...copied.claim }, '{"credited":100}');
      for (const name of ['evt-direct', 'evt-renewed', 'evt-copied']) {
        const record = await ledger.get('points', name);
        expect(record, name).toMatchObject({
          status: 'SUCCESS',
          attempt: 1,
          leaseUntil: null,
          fingerprint: 'fp-1',
          brokerId: 'broker-1',
          topic: 'payments',
          remark: null,
          result: '{"credited":100}',
          createdAt: new Date(now - 20),
          updatedAt: new Date(now),
        });
      }
      // Neither path completes twice.
      await expect(ledger.complete(direct.claim, null)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(ledger.complete(renewed, null)).rejects.toBeInstanceOf(LeaseLostError);
    });

    it('keeps a failed attempt as FAIL with its remark and lets the next delivery reclaim it', async () => {
      const first = await ledger.claim(request('evt-1'));
      if (first.status !== 'acquired') throw new Error('expected acquired');
      await ledger.fail(first.claim, 'Error: points service down');
      expect(await ledger.get('points', 'evt-1')).toMatchObject({
        status: 'FAIL',
        remark: 'Error: points service down',
        leaseUntil: null,
      });
      expect(await ledger.claim(request('evt-1'))).toMatchObject({
        status: 'reclaimed',
        claim: { attempt: 2 },
      });
    });

    it('deletes a released claim so the next delivery acquires afresh', async () => {
      const first = await ledger.claim(request('evt-1'));
      if (first.status !== 'acquired') throw new Error('expected acquired');
      await ledger.release(first.claim);
      expect(await ledger.get('points', 'evt-1')).toBeUndefined();
      expect(await ledger.claim(request('evt-1'))).toMatchObject({
        status: 'acquired',
        claim: { attempt: 1 },
      });
    });

    it('lets exactly one of many concurrent claims on one key win', async () => {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => ledger.claim(request('evt-race', { brokerId: `b-${i}` }))),
      );
      expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'busy')).toHaveLength(19);
    });

    it('runs a script that the server has not cached through EVAL after NOSCRIPT', async () => {
      const script = new RedisScript(`-- ${randomUUID()}\nreturn tonumber(ARGV[1]) + 1`);
      expect(await script.run(redis.redis, [key('any')], ['41'])).toBe(42);
      expect(await redis.redis.evalSha(script.sha, [key('any')], ['1'])).toBe(2);
    });

    describe('batching concurrent calls', () => {
      it('claims and completes 100 keys, each raced by a copy, in a few script calls with one winner per key', async () => {
        const { ledger: countedRedis, calls } = counting(redis.redis);
        const batched = new RedisLedger({ client: countedRedis, prefix: redis.prefix, clock: () => now });
        expect(batched.batching).toBe(true);
        await batched.init();
        calls.clear();
        const keys = Array.from({ length: 100 }, (_, i) => `evt-${i}`);
        const claims = await Promise.all(
          [...keys, ...keys].map((k, i) => batched.claim(request(k, { brokerId: `b-${i}` }))),
        );
        expect(claims.filter((c) => c.status === 'acquired')).toHaveLength(100);
        expect(claims.filter((c) => c.status === 'busy')).toHaveLength(100);
        expect(calls.get('setNxGet')).toBeUndefined();
        expect(calls.get('evalSha')).toBeLessThanOrEqual(2); // 200 claims: batches of at most 128
        await Promise.all(
          claims.flatMap((c) =>
            c.status === 'acquired' ? [batched.complete(c.claim, `"${c.claim.key}"`)] : [],
          ),
        );
        expect(calls.get('evalSha')).toBeLessThanOrEqual(3);
        for (const k of keys) {
          expect(await ledger.get('points', k)).toMatchObject({ status: 'SUCCESS', result: `"${k}"` });
        }
        const again = await Promise.all(keys.map((k) => batched.claim(request(k))));
        expect(again.every((c) => c.status === 'duplicate')).toBe(true);
      });

      it('fails only the stale owner of a batch of completions', async () => {
        const claims = await Promise.all(['a', 'b', 'c', 'd'].map((k) => ledger.claim(request(k))));
        const held = claims.map((c) => {
          if (c.status !== 'acquired') throw new Error('expected acquired');
          return c.claim;
        });
        const settled = await Promise.allSettled(
          held.map((claim, i) => ledger.complete(i === 1 ? { ...claim, owner: randomUUID() } : claim, null)),
        );
        expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
        expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
        expect(await ledger.get('points', 'b')).toMatchObject({ status: 'PROCESSING' });
        for (const k of ['a', 'c', 'd']) {
          expect(await ledger.get('points', k)).toMatchObject({ status: 'SUCCESS' });
        }
      });

      it('fails only the keys that hold something else, and claims the rest of the batch', async () => {
        await redis.redis.setPx(key('not-json'), 'plain text', 60_000);
        const settled = await Promise.allSettled(
          ['not-json', 'fine-1', 'fine-2'].map((k) => ledger.claim(request(k))),
        );
        expect(settled.map((s) => s.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
        expect((settled[0] as PromiseRejectedResult).reason).toBeInstanceOf(LedgerUnavailableError);
        expect(await redis.redis.get(key('not-json'))).toBe('plain text');
        const claimed = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
        expect(claimed.map((c) => c.status)).toEqual(['acquired', 'acquired']);
      });

      it('answers a key of another Redis type with an error for that key alone', async () => {
        await redis.redis.eval("redis.call('RPUSH', KEYS[1], 'x') return 1", [key('a-list')], []);
        const settled = await Promise.allSettled(['ok-1', 'a-list'].map((k) => ledger.claim(request(k))));
        expect(settled[0]).toMatchObject({ status: 'fulfilled', value: { status: 'acquired' } });
        expect(settled[1]).toMatchObject({ status: 'rejected' });
        expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
      });

      it('sends one command per key when configured off', async () => {
        const { ledger: countedRedis, calls } = counting(redis.redis);
        const single = new RedisLedger({ client: countedRedis, prefix: redis.prefix, batch: false });
        expect(single.batching).toBe(false);
        await single.init();
        calls.clear();
        await Promise.all(['x', 'y', 'z'].map((k) => single.claim(request(k))));
        expect(Object.fromEntries(calls)).toEqual({ setNxGet: 3 });
      });
    });

    it('claims with SET NX then GET on a server that refuses SET NX GET (Redis before 7.0)', async () => {
      const { ledger: redis6, calls } = counting<RedisLike>({
        ...redis.redis,
        client: 'redis-6.2',
        setNxGet: () => Promise.reject(new Error('ERR syntax error')),
      });
      const old = new RedisLedger({ client: redis6, prefix: redis.prefix, clock: () => now });
      await old.init();
      calls.clear();
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => old.claim(request('evt-6', { brokerId: `b-${i}` }))),
      );
      expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'busy')).toHaveLength(9);
      expect(Object.fromEntries(calls)).toEqual({ setNx: 10, get: 9 });
      const won = results.find((r) => r.status === 'acquired');
      if (won?.status !== 'acquired') throw new Error('expected one acquired');
      await old.complete(won.claim, null);
      expect(await old.claim(request('evt-6'))).toMatchObject({ status: 'duplicate' });
    });

    it('refuses to start on a client that drops NX, instead of deduplicating nothing', async () => {
      const ignoresNx: RedisLike = {
        ...redis.redis,
        client: 'broken',
        setNxGet: async (k, value, ttl) => {
          await redis.redis.setPx(k, value, ttl);
          return null;
        },
      };
      const broken = new RedisLedger({ client: ignoresNx, prefix: redis.prefix });
      await expect(broken.init()).rejects.toBeInstanceOf(ConfigError);
    });
  });
});
