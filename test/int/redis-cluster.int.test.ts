import { spawnSync } from 'node:child_process';
import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPipeline, type ClaimRequest } from 'oncemq';
import { fromIoredis, fromNodeRedis, RedisLedger, type RedisClientInput, type RedisLike } from 'oncemq/redis';
import { OwnRedisCluster } from '../support/redis-server.js';

const hasRedisTools =
  spawnSync('redis-server', ['--version']).status === 0 && spawnSync('redis-cli', ['--version']).status === 0;
if (!hasRedisTools && process.env.CI === 'true')
  throw new Error('CI=true and redis-server / redis-cli are not installed');

const request = (key: string): ClaimRequest => ({
  group: 'points',
  key,
  fingerprint: 'fp-1',
  brokerId: `broker-${key}`,
  topic: 'payments',
  leaseMs: 30_000,
});

/** A cluster client of each kind, as a user creates it, and the adapter a user might write by hand. */
interface ClusterClient {
  readonly client: RedisClientInput;
  /** An adapter that does not say it drives a cluster, as a hand-written one might not. */
  readonly unflagged: RedisLike;
  close(): Promise<void>;
}

const KINDS: Readonly<Record<string, (port: number) => Promise<ClusterClient>>> = {
  'node-redis': async (port) => {
    const client = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${port}` }] });
    client.on('error', () => undefined);
    await client.connect();
    return {
      client,
      unflagged: { ...fromNodeRedis(client), cluster: false },
      close: () => client.close(),
    };
  },
  ioredis: (port) => {
    const client = new Cluster([{ host: '127.0.0.1', port }]);
    client.on('error', () => undefined);
    return Promise.resolve({
      client,
      unflagged: { ...fromIoredis(client), cluster: false },
      close: async () => {
        await client.quit();
      },
    });
  },
};

describe.skipIf(!hasRedisTools)('RedisLedger on a Redis Cluster (three private masters)', () => {
  let cluster: OwnRedisCluster;

  beforeAll(async () => {
    cluster = await OwnRedisCluster.start(3);
  }, 60_000);

  afterAll(async () => {
    await cluster.stop();
  });

  describe.each(Object.keys(KINDS))('with %s', (kind) => {
    let connection: ClusterClient;

    beforeAll(async () => {
      const port = cluster.nodes[0]?.port;
      const connect = KINDS[kind];
      if (port === undefined || connect === undefined) throw new Error('no cluster node');
      connection = await connect(port);
    });

    afterAll(async () => {
      await connection.close();
    });

    it('sees the cluster client, sends no multi-key scripts, and claims keys spread over every master once each', async () => {
      const ledger = new RedisLedger({ client: connection.client, prefix: `cl-${kind}` });
      await ledger.init();
      expect(ledger.batching).toBe(false);
      const keys = Array.from({ length: 60 }, (_, i) => `evt-${i}`);
      const claims = await Promise.all([...keys, ...keys].map((key) => ledger.claim(request(key))));
      expect(claims.filter((c) => c.status === 'acquired')).toHaveLength(60);
      expect(claims.filter((c) => c.status === 'busy')).toHaveLength(60);
      await Promise.all(
        claims.flatMap((c) => (c.status === 'acquired' ? [ledger.complete(c.claim, null)] : [])),
      );
      const again = await Promise.all(keys.map((key) => ledger.claim(request(key))));
      expect(again.every((c) => c.status === 'duplicate')).toBe(true);
      // The keys did spread: every master holds some of them.
      for (const node of cluster.nodes) {
        const held = spawnSync('redis-cli', [
          '-p',
          String(node.port),
          '--scan',
          '--pattern',
          `cl-${kind}:points:*`,
        ]);
        expect(held.stdout.toString().trim().length).toBeGreaterThan(0);
      }
    });

    it('turns batching off at the first CROSSSLOT refusal of an adapter that did not say "cluster", losing no claim', async () => {
      const ledger = new RedisLedger({ client: connection.unflagged, prefix: `cl-unflagged-${kind}` });
      await ledger.init();
      expect(ledger.batching).toBe(true);
      const keys = Array.from({ length: 40 }, (_, i) => `evt-${i}`);
      const claims = await Promise.all([...keys, ...keys].map((key) => ledger.claim(request(key))));
      expect(ledger.batching).toBe(false);
      expect(claims.filter((c) => c.status === 'acquired')).toHaveLength(40);
      expect(claims.filter((c) => c.status === 'busy')).toHaveLength(40);
    });

    it('runs payment-to-points on the cluster: each event credited once however many copies arrive', async () => {
      const credits = new Map<string, number>();
      const pipeline = createPipeline<never, { eventId: string }>({
        ledger: new RedisLedger({ client: connection.client, prefix: `cl-points-${kind}` }),
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: (message) => {
          credits.set(message.eventId, (credits.get(message.eventId) ?? 0) + 1);
        },
      });
      const copies = Array.from({ length: 90 }, (_, i) =>
        pipeline.process({
          brokerId: `b-${i}`,
          topic: 'payments',
          headers: {},
          body: new TextEncoder().encode(JSON.stringify({ eventId: `evt-${i % 30}` })),
          deliveryCount: 1,
        }),
      );
      const outcomes = await Promise.all(copies);
      expect(credits.size).toBe(30);
      expect([...credits.values()].every((n) => n === 1)).toBe(true);
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(30);
      expect(outcomes.every((o) => ['executed', 'duplicate', 'busy'].includes(o.kind))).toBe(true);
    });
  });
});
