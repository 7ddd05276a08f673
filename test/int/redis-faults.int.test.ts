import { spawnSync } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEnvelope, createPipeline, RetryPolicy, type OutcomeKind } from 'oncemq';
import { RedisLedger } from 'oncemq/redis';
import { sleep } from '../support/points.js';
import { connectRedis, REDIS_CLIENT_KINDS, type TestRedis } from '../support/redis.js';
import { OwnRedisServer } from '../support/redis-server.js';

const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;
if (!hasRedisServer && process.env.CI === 'true')
  throw new Error('CI=true and redis-server is not installed');

const EVENTS = 300;
const WORKERS = 32;

describe.skipIf(!hasRedisServer)('RedisLedger batches under a stalled Redis (private redis-server)', () => {
  describe.each(REDIS_CLIENT_KINDS)('with %s', (kind) => {
    let server: OwnRedisServer;
    let redis: TestRedis;
    let admin: TestRedis;

    beforeEach(async () => {
      server = await OwnRedisServer.start();
      redis = await connectRedis(kind, server.url);
      admin = await connectRedis(kind, server.url, redis.prefix);
    });

    afterEach(async () => {
      await admin.close();
      await redis.close();
      await server.stop();
    });

    it('applies every event once when whole batches time out mid-run, and acks or retries every delivery', async () => {
      const ledger = new RedisLedger({ client: redis.client, prefix: redis.prefix, timeout: 50 });
      expect(ledger.batching).toBe(true);
      const applied = new Map<string, number>();
      const pipeline = createPipeline<never, { eventId: string }>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        lease: '400ms',
        retry: RetryPolicy.exponential({ base: '1ms', max: '1ms', count: 1000 }),
        handler: async (message) => {
          await sleep(1);
          applied.set(message.eventId, (applied.get(message.eventId) ?? 0) + 1);
        },
      });
      // Every event is delivered twice (a lost-ack copy); a delivery answered "retry" goes back in line.
      const queue = Array.from({ length: EVENTS * 2 }, (_, i) => `evt-${i % EVENTS}`);
      const kinds = new Map<OutcomeKind, number>();
      let delivered = 0;
      let stalls = 0;
      const worker = async (): Promise<void> => {
        for (let eventId = queue.shift(); eventId !== undefined; eventId = queue.shift()) {
          delivered++;
          if (delivered % 150 === 0 && stalls < 3) {
            stalls++;
            // The server stops answering every client for 200 ms: batches in flight outlive the timeout.
            await admin.pausePrivateServer(200);
          }
          const outcome = await pipeline.process(
            createEnvelope({ brokerId: `b-${delivered}`, topic: 'payments', body: { eventId } }),
          );
          kinds.set(outcome.kind, (kinds.get(outcome.kind) ?? 0) + 1);
          if (outcome.action === 'retry') {
            queue.push(eventId);
            await sleep(5);
          }
        }
      };
      await Promise.all(Array.from({ length: WORKERS }, worker));

      expect(stalls).toBe(3);
      expect(kinds.get('retry') ?? 0).toBeGreaterThan(0); // the stalls did fail calls
      // Nothing was dead-lettered or lost: every delivery was acked (executed, duplicate) or retried
      // (retry: the call failed; busy: a claim that landed after its caller gave up holds the key until its lease ends).
      expect(
        [...kinds.keys()].filter((k) => !['executed', 'duplicate', 'retry', 'busy'].includes(k)),
      ).toEqual([]);
      expect(applied.size).toBe(EVENTS);
      expect([...applied].filter(([, count]) => count !== 1)).toEqual([]);
      // A delivery whose completion timed out answered "retry" although its effect was applied (the
      // completion still landed after the stall): its copies then find the key done.
      expect(kinds.get('executed')).toBeLessThanOrEqual(EVENTS);
      expect((kinds.get('executed') ?? 0) + (kinds.get('duplicate') ?? 0)).toBe(EVENTS * 2);
    });
  });
});
