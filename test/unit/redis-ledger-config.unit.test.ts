import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { RedisLedger, type RedisLike } from 'oncemq/redis';
import { redisKey } from '../support/internal.js';

const unused = (): Promise<never> => Promise.reject(new Error('no I/O in unit tests'));
const redis: RedisLike = {
  client: 'stub',
  setNx: unused,
  setNxGet: unused,
  setPx: unused,
  get: unused,
  del: unused,
  evalSha: unused,
  eval: unused,
};

describe('RedisLedger configuration', () => {
  it('exposes the retention as retentionMs for the pipeline to check against the horizon', () => {
    expect(new RedisLedger({ client: redis, retention: '2d' }).retentionMs).toBe(172_800_000);
    expect(new RedisLedger({ client: redis }).retentionMs).toBe(604_800_000);
  });

  it.each([0, '0s', 0.5, '1.5ms', -1, Number.POSITIVE_INFINITY, 'soon'])(
    'refuses the TTL %s at construction with a ConfigError naming retention',
    (retention) => {
      expect(() => new RedisLedger({ client: redis, retention })).toThrow(ConfigError);
      expect(() => new RedisLedger({ client: redis, retention })).toThrow(/^retention: /);
    },
  );

  it('refuses a prefix with a hash tag of its own', () => {
    expect(() => new RedisLedger({ client: redis, prefix: 'app{1}' })).toThrow(/^prefix: /);
  });

  it('refuses something that is no Redis client', () => {
    expect(() => new RedisLedger({ client: { get: () => 1 } as unknown as RedisLike })).toThrow(/^client: /);
  });

  it('batches by default, and never on a cluster client, whose keys live on different slots', () => {
    const nodeRedis = {
      evalSha: unused,
      scriptLoad: unused,
      set: unused,
      get: unused,
      del: unused,
      eval: unused,
    };
    const ioredis = {
      evalsha: unused,
      defineCommand: unused,
      set: unused,
      get: unused,
      del: unused,
      eval: unused,
    };
    expect(new RedisLedger({ client: redis }).batching).toBe(true);
    expect(new RedisLedger({ client: redis, batch: false }).batching).toBe(false);
    expect(new RedisLedger({ client: { ...redis, cluster: true } }).batching).toBe(false);
    expect(new RedisLedger({ client: nodeRedis }).batching).toBe(true);
    const nodeRedisCluster = { ...nodeRedis, getSlotMaster: unused };
    expect(new RedisLedger({ client: nodeRedisCluster }).batching).toBe(false);
    expect(new RedisLedger({ client: ioredis }).batching).toBe(true);
    const ioredisCluster = { ...ioredis, isCluster: true };
    expect(new RedisLedger({ client: ioredisCluster }).batching).toBe(false);
  });

  it('declares leased mode only, and no purge since TTLs expire finished keys', () => {
    const ledger = new RedisLedger({ client: redis });
    expect(ledger.capabilities).toMatchObject({
      transactional: false,
      leased: true,
      purge: false,
      storesResult: true,
    });
  });

  it('puts the business key in the hash tag so one key maps to one Cluster slot', () => {
    expect(redisKey('oncemq', 'points', 'evt-1')).toBe('oncemq:points:{evt-1}');
  });
});
