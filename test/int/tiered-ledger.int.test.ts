import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, RetryPolicy, type Ledger } from 'oncemq';
import type { RedisLike } from 'oncemq/redis';
import { redisKey } from '../support/internal.js';
import { SqliteLedger } from 'oncemq/sqlite';
import { TieredLedger, type TieredLedgerConfig } from 'oncemq/tiered';
import {
  addPoints,
  balance,
  openPointsDb,
  payment,
  paymentEnvelope,
  scratchDir,
  sleep,
  type PaymentSucceeded,
} from '../support/points.js';
import { connectRedis, REDIS_CLIENT_KINDS, REDIS_SERVICE, type TestRedis } from '../support/redis.js';
import { counting } from '../support/counting.js';
import { findService } from '../support/services.js';

const service = await findService(REDIS_SERVICE);
const event = payment(1);

describe.skipIf(!service.available)('TieredLedger over SQLite', () => {
  describe.each(REDIS_CLIENT_KINDS)('with %s', (kind) => {
    let redis: TestRedis;
    let scratch: ReturnType<typeof scratchDir>;
    let db: Database.Database;
    let sql: ReturnType<typeof counting<SqliteLedger<Database.Database>>>;

    beforeEach(async () => {
      redis = await connectRedis(kind, service.url);
      scratch = scratchDir();
      db = openPointsDb(join(scratch.dir, 'app.db'));
      sql = counting(new SqliteLedger({ database: db }));
    });

    afterEach(async () => {
      await redis.close();
      db.close();
      scratch.remove();
    });

    const tiered = (
      overrides: Partial<TieredLedgerConfig<Database.Database>> = {},
    ): TieredLedger<Database.Database> =>
      new TieredLedger({ ledger: sql.ledger, redis: redis.client, prefix: redis.prefix, ...overrides });

    const cacheKey = (key: string): string => redisKey(redis.prefix, 'points', key);

    const pointsPipeline = (ledger: Ledger<Database.Database>, onHandler?: () => Promise<void>) =>
      createPipeline<Database.Database, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          await onHandler?.();
          addPoints(ctx.tx, message.userId, 100);
          return { credited: 100 };
        },
      });

    it('answers a duplicate of a completed key from Redis without touching the SQL ledger', async () => {
      const ledger = tiered();
      const pipeline = pointsPipeline(ledger);
      expect(pipeline.mode).toBe('transactional');
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'executed' });
      expect(sql.calls.get('transaction')).toBe(1);
      for (let i = 0; i < 3; i++) {
        expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({
          kind: 'duplicate',
          source: 'redelivery',
          result: { credited: 100 },
        });
      }
      expect(sql.calls.get('transaction')).toBe(1);
      expect(ledger.cacheMetrics()).toMatchObject({ hits: 3, misses: 1, writes: 1 });
      expect(balance(db, 'user-1')).toBe(100);
    });

    it('reads the cache for concurrent copies in one script call, each answered on its own', async () => {
      const { ledger: countingRedis, calls } = counting(redis.redis);
      const ledger = tiered({ redis: countingRedis });
      const pipeline = pointsPipeline(ledger);
      const events = Array.from({ length: 30 }, (_, i) => payment(i + 1));
      for (const e of events) await pipeline.process(paymentEnvelope(e));
      await redis.redis.setPx(cacheKey('evt-foreign'), 'not a record', 60_000);
      calls.clear();
      const copies = [...events.map((e) => paymentEnvelope(e)), paymentEnvelope(payment(999), 'b-new')];
      copies.push(paymentEnvelope({ ...payment(1000), eventId: 'evt-foreign' }, 'b-foreign'));
      const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
      expect(outcomes.slice(0, 30).every((o) => o.kind === 'duplicate')).toBe(true);
      expect(outcomes.slice(30).map((o) => o.kind)).toEqual(['executed', 'executed']);
      // The reads: none one by one, one script call for all (the two misses then write with SET).
      expect({ get: calls.get('get') ?? 0, evalSha: calls.get('evalSha') ?? 0 }).toEqual({
        get: 0,
        evalSha: 1,
      });
      expect(ledger.cacheMetrics()).toMatchObject({ hits: 30 });
    });

    it('reads one key at a time when configured off', async () => {
      const { ledger: countingRedis, calls } = counting(redis.redis);
      const ledger = tiered({ batch: false, redis: countingRedis });
      const pipeline = pointsPipeline(ledger);
      await Promise.all([1, 2, 3].map((n) => pipeline.process(paymentEnvelope(payment(n)))));
      expect(calls.get('get')).toBe(3);
    });

    it('writes the Redis key only after the SQL commit, never from inside the transaction', async () => {
      const seen: (string | null)[] = [];
      const pipeline = pointsPipeline(tiered(), async () => {
        seen.push(await redis.redis.get(cacheKey('evt-1')));
      });
      await pipeline.process(paymentEnvelope(event));
      expect(seen).toEqual([null]);
      expect(await redis.redis.get(cacheKey('evt-1'))).toContain('"s":"SUCCESS"');
    });

    it('writes nothing to Redis when the handler throws, and the redelivery applies the effect once', async () => {
      let fail = true;
      const ledger = tiered();
      const pipeline = pointsPipeline(ledger, () => {
        if (fail) {
          fail = false;
          return Promise.reject(new Error('points service crashed'));
        }
        return Promise.resolve();
      });
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'retry' });
      expect(await redis.redis.get(cacheKey('evt-1'))).toBeNull();
      expect(await pipeline.process(paymentEnvelope(event, 'broker-evt-1', 2))).toMatchObject({
        kind: 'executed',
        attempt: 2,
      });
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'duplicate' });
      expect(balance(db, 'user-1')).toBe(100);
    });

    it('answers a conflict from Redis for a key reused with another payload', async () => {
      const pipeline = pointsPipeline(tiered());
      await pipeline.process(paymentEnvelope(event));
      expect(await pipeline.process(paymentEnvelope({ ...event, userId: 'user-2' }))).toMatchObject({
        kind: 'conflict',
      });
      expect(sql.calls.get('transaction')).toBe(1);
      expect(balance(db, 'user-2')).toBe(0);
    });

    it('still catches a duplicate whose Redis key expired, in SQL, and puts the key back', async () => {
      const ledger = tiered({ cacheTtl: 100 });
      const pipeline = pointsPipeline(ledger);
      await pipeline.process(paymentEnvelope(event));
      for (let i = 0; i < 100 && (await redis.redis.get(cacheKey('evt-1'))) !== null; i++) await sleep(20);
      expect(await redis.redis.get(cacheKey('evt-1'))).toBeNull();
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'duplicate' });
      expect(sql.calls.get('transaction')).toBe(2);
      expect(await redis.redis.get(cacheKey('evt-1'))).toContain('"s":"SUCCESS"');
      expect(balance(db, 'user-1')).toBe(100);
    });

    it('runs on SQL alone while Redis hangs, failing no message, and stops asking Redis for a while', async () => {
      const hanging: RedisLike = {
        ...redis.redis,
        client: 'hanging',
        get: () => new Promise<never>(() => undefined),
        setPx: () => new Promise<never>(() => undefined),
      };
      const ledger = tiered({ redis: hanging, timeout: 20, retryAfter: '1h' });
      const pipeline = pointsPipeline(ledger);
      const kinds = [];
      for (let i = 0; i < 4; i++) kinds.push((await pipeline.process(paymentEnvelope(event))).kind);
      expect(kinds).toEqual(['executed', 'duplicate', 'duplicate', 'duplicate']);
      // After the one failed read: the write after the commit, then three reads and three backfills are skipped.
      expect(ledger.cacheMetrics()).toMatchObject({ hits: 0, readFailures: 1, breakerOpens: 1, skipped: 7 });
      expect(balance(db, 'user-1')).toBe(100);
    });

    it('in leased mode, claims in SQL and serves later duplicates from Redis once one was backfilled', async () => {
      const ledger = tiered();
      const credits: string[] = [];
      const pipeline = createPipeline<Database.Database, PaymentSucceeded>({
        ledger,
        group: 'points',
        mode: 'leased',
        key: { jsonPath: 'eventId' },
        retry: RetryPolicy.rocketmq(),
        handler: (message) => {
          credits.push(message.eventId);
        },
      });
      const kinds = [];
      for (let i = 0; i < 3; i++) kinds.push((await pipeline.process(paymentEnvelope(event))).kind);
      expect(kinds).toEqual(['executed', 'duplicate', 'duplicate']);
      expect(sql.calls.get('claim')).toBe(2);
      expect(credits).toEqual(['evt-1']);
    });
  });
});
