import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEnvelope, createPipeline, type OutcomeKind } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { TieredLedger } from 'oncemq/tiered';
import { openPointsDb, scratchDir, sleep } from '../support/points.js';
import { connectRedis, REDIS_CLIENT_KINDS, type TestRedis } from '../support/redis.js';
import { OwnRedisServer } from '../support/redis-server.js';

const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;
if (!hasRedisServer && process.env.CI === 'true')
  throw new Error('CI=true and redis-server is not installed');

const EVENTS = 120;
type Fault = 'flushall' | 'stop-start';

describe.skipIf(!hasRedisServer)('TieredLedger under Redis faults (private redis-server)', () => {
  describe.each(REDIS_CLIENT_KINDS)('with %s', (kind) => {
    let server: OwnRedisServer;
    let redis: TestRedis;
    let scratch: ReturnType<typeof scratchDir>;
    let db: Database.Database;

    beforeEach(async () => {
      server = await OwnRedisServer.start();
      redis = await connectRedis(kind, server.url);
      scratch = scratchDir();
      db = openPointsDb(join(scratch.dir, 'app.db'));
      db.exec('CREATE TABLE effects (event_id TEXT PRIMARY KEY, applied INTEGER NOT NULL)');
    });

    afterEach(async () => {
      await server.start();
      await redis.close();
      await server.stop();
      db.close();
      scratch.remove();
    });

    /** Waits (bounded) until the client answers again after a restart. */
    const reachable = async (): Promise<void> => {
      for (let i = 0; i < 200; i++) {
        const ok = await Promise.race([
          redis.redis.get(`${redis.prefix}:ping`).then(
            () => true,
            () => false,
          ),
          sleep(100).then(() => false),
        ]);
        if (ok) return;
        await sleep(25);
      }
      throw new Error('the client did not reconnect');
    };

    it.each<Fault>(['flushall', 'stop-start'])(
      'applies every event exactly once across a Redis %s mid-run and uses Redis again afterwards',
      async (fault) => {
        const ledger = new TieredLedger({
          ledger: new SqliteLedger({ database: db }),
          redis: redis.client,
          prefix: redis.prefix,
          timeout: 250,
          retryAfter: 50,
        });
        const pipeline = createPipeline<Database.Database, { eventId: string }>({
          ledger,
          group: 'points',
          key: { jsonPath: 'eventId' },
          handler: (message, ctx) => {
            ctx.tx
              .prepare(
                'INSERT INTO effects (event_id, applied) VALUES (?, 1) ON CONFLICT (event_id) DO UPDATE SET applied = applied + 1',
              )
              .run(message.eventId);
          },
        });
        const deliver = async (i: number, copy: string): Promise<OutcomeKind> =>
          (
            await pipeline.process(
              createEnvelope({ brokerId: `${copy}-${i}`, topic: 'payments', body: { eventId: `evt-${i}` } }),
            )
          ).kind;

        const kinds: OutcomeKind[] = [];
        for (let i = 0; i < EVENTS; i++) {
          if (i === EVENTS / 3) {
            if (fault === 'flushall') await redis.flushAllOfPrivateServer();
            else await server.stop();
          }
          if (i === (2 * EVENTS) / 3 && fault === 'stop-start') {
            await server.start();
            await reachable();
          }
          kinds.push(await deliver(i, 'first'));
          kinds.push(await deliver(Math.floor(i / 2), 'redelivery'));
        }
        // Redis is used again once it answers: replay every event until the cache serves some of
        // them. A loaded machine can still time a call out after the restart (the breaker opens
        // again for `retryAfter`), so a few rounds are allowed; every round must stay exactly once.
        const hitsBefore = ledger.cacheMetrics().hits;
        for (let round = 0; round < 5 && ledger.cacheMetrics().hits === hitsBefore; round++) {
          await sleep(60); // the breaker's retry interval, so the next call probes Redis again
          for (let i = 0; i < EVENTS; i++) kinds.push(await deliver(i, `replay${round}`));
        }

        const effects = db.prepare('SELECT event_id, applied FROM effects').all() as {
          event_id: string;
          applied: number;
        }[];
        expect(effects).toHaveLength(EVENTS);
        expect(effects.filter((row) => row.applied !== 1)).toEqual([]);
        expect(kinds.filter((k) => k === 'executed')).toHaveLength(EVENTS);
        expect(kinds.filter((k) => k !== 'executed' && k !== 'duplicate')).toEqual([]);
        expect(ledger.cacheMetrics().hits).toBeGreaterThan(hitsBefore);
        if (fault === 'stop-start') expect(ledger.cacheMetrics().breakerOpens).toBeGreaterThan(0);
      },
    );
  });
});
