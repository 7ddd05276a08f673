import type pg from 'pg';
import { createClient } from 'redis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { fromNodeRedis, redisKey } from 'oncemq/redis';
import { describeLedgerConformance } from 'oncemq/conformance';
import { TieredLedger } from 'oncemq/tiered';
import { paymentEnvelope, type PaymentSucceeded } from '../support/points.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';
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
      const schema = scratchSchema();
      const admin = newPool(postgres.url, 1);
      await admin.query(`CREATE SCHEMA "${schema}"`);
      await admin.query(`CREATE TABLE "${schema}".effects (key text NOT NULL)`);
      const pools: pg.Pool[] = [admin];
      const redis = await connectRedis('node-redis', redisService.url);
      return {
        async open(options = {}) {
          const pool = newPool(postgres.url);
          pools.push(pool);
          const ledger = new TieredLedger({
            ledger: new PostgresLedger({ pool, schema, ...options }),
            redis: redis.client,
            prefix: redis.prefix,
          });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (tx, key) => {
            await tx.query(`INSERT INTO "${schema}".effects (key) VALUES ($1)`, [key]);
          },
          count: async (key) => {
            const { rows } = await admin.query<{ n: number }>(
              `SELECT COUNT(*)::int AS n FROM "${schema}".effects WHERE key = $1`,
              [key],
            );
            return rows[0]?.n ?? 0;
          },
        },
        async teardown() {
          await dropSchema(admin, schema);
          await Promise.all(pools.map((pool) => pool.end()));
          await redis.close();
        },
      };
    },
  });

  describe('payment-to-points (transactional)', () => {
    const event: PaymentSucceeded = { eventId: 'evt-1', orderId: 'order-1', userId: 'user-1', amount: 100 };
    let pool: pg.Pool;
    let schema: string;
    let redis: TestRedis;

    beforeEach(async () => {
      pool = newPool(postgres.url, 4);
      schema = scratchSchema();
      await pool.query(`CREATE SCHEMA "${schema}"`);
      await pool.query(`CREATE TABLE "${schema}".points (user_id text PRIMARY KEY, balance int NOT NULL)`);
      redis = await connectRedis('ioredis', redisService.url);
    });

    afterEach(async () => {
      await dropSchema(pool, schema);
      await pool.end();
      await redis.close();
    });

    const balance = async (): Promise<number> => {
      const { rows } = await pool.query<{ balance: number }>(`SELECT balance FROM "${schema}".points`);
      return rows[0]?.balance ?? 0;
    };

    it('credits once, answers copies from Redis, and from PostgreSQL once the cache key is gone', async () => {
      const ledger = new TieredLedger({
        ledger: new PostgresLedger({ pool, schema }),
        redis: redis.client,
        prefix: redis.prefix,
      });
      const pipeline = createPipeline<PgClientLike, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          await ctx.tx.query(
            `INSERT INTO "${schema}".points (user_id, balance) VALUES ($1, 100)
             ON CONFLICT (user_id) DO UPDATE SET balance = points.balance + 100`,
            [message.userId],
          );
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
      expect(await balance()).toBe(100);
    });
  });
});
