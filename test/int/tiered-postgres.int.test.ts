import { createClient } from 'redis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { fromNodeRedis } from 'oncemq/redis';
import { redisKey } from '../support/internal.js';
import { describeLedgerConformance } from 'oncemq/conformance';
import { TieredLedger } from 'oncemq/tiered';
import { payment, paymentEnvelope, type PaymentSucceeded } from '../support/points.js';
import { findPostgres, pointsSchema, postgresNamespace, type PointsSchema } from '../support/postgres.js';
import { connectRedis, REDIS_SERVICE, type TestRedis } from '../support/redis.js';
import { findService } from '../support/services.js';

const postgres = await findPostgres();
const redisService = await findService(REDIS_SERVICE);
const available = postgres.available && redisService.available;
const unconnected = fromNodeRedis(createClient());

describe.skipIf(!available)('TieredLedger over PostgreSQL', () => {
  describeLedgerConformance<PgClientLike>('tiered over postgres (node-redis)', {
    capabilities: new TieredLedger({
      ledger: new PostgresLedger({ connectionString: postgres.url }),
      redis: unconnected,
    }).capabilities,
    construct: (table) =>
      new TieredLedger({
        ledger: new PostgresLedger({ connectionString: postgres.url, table }),
        redis: unconnected,
      }),
    async create() {
      const redis = await connectRedis('node-redis', redisService.url);
      return postgresNamespace(
        postgres.url,
        (pool, schema, options) =>
          new TieredLedger({
            ledger: new PostgresLedger({ pool, schema, ...options }),
            redis: redis.client,
            prefix: redis.prefix,
          }),
        () => redis.close(),
      );
    },
  });

  describe('payment-to-points (transactional)', () => {
    const event = payment(1);
    let points: PointsSchema;
    let redis: TestRedis;

    beforeEach(async () => {
      points = await pointsSchema(postgres.url, 4);
      redis = await connectRedis('ioredis', redisService.url);
    });

    afterEach(async () => {
      await points.close();
      await redis.close();
    });

    it('credits once, answers copies from Redis, and from PostgreSQL once the cache key is gone', async () => {
      const ledger = new TieredLedger({
        ledger: new PostgresLedger({ pool: points.pool, schema: points.schema }),
        redis: redis.client,
        prefix: redis.prefix,
      });
      const pipeline = createPipeline<PgClientLike, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          await points.addPoints(ctx.tx, message.userId, 100);
        },
      });
      expect(pipeline.mode).toBe('transactional');
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'executed' });
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'duplicate' });
      expect(ledger.cacheMetrics()).toMatchObject({ hits: 1, writes: 1 });
      await redis.redis.del(redisKey(redis.prefix, 'points', 'evt-1'));
      expect(await pipeline.process(paymentEnvelope(event, 'broker-other'))).toMatchObject({
        kind: 'duplicate',
        source: 'republish',
      });
      expect(ledger.cacheMetrics()).toMatchObject({ hits: 1, misses: 2, writes: 2 });
      expect(await points.balance(event.userId)).toBe(100);
    });
  });
});
