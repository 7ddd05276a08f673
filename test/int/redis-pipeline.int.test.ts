import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, createPipeline, RetryPolicy } from 'oncemq';
import { RedisLedger } from 'oncemq/redis';
import { payment, paymentEnvelope, sleep, type PaymentSucceeded } from '../support/points.js';
import { connectRedis, REDIS_CLIENT_KINDS, REDIS_SERVICE, type TestRedis } from '../support/redis.js';
import { counting } from '../support/counting.js';
import { findService } from '../support/services.js';

const service = await findService(REDIS_SERVICE);
const event = payment(1);

/** A points service outside any database oncemq shares: counts every credit it applies. */
class PointsService {
  readonly balances = new Map<string, number>();
  credits = 0;
  credit(userId: string, amount: number): void {
    this.credits++;
    this.balances.set(userId, (this.balances.get(userId) ?? 0) + amount);
  }
}

describe.skipIf(!service.available)('payment-to-points on a Redis ledger (leased)', () => {
  describe.each(REDIS_CLIENT_KINDS)('with %s', (kind) => {
    let redis: TestRedis;
    let points: PointsService;

    beforeEach(async () => {
      redis = await connectRedis(kind, service.url);
      points = new PointsService();
    });

    afterEach(async () => {
      await redis.close();
    });

    const pipelineOn = (ledger: RedisLedger, failFirst = false) => {
      let fail = failFirst;
      return createPipeline<never, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: (message) => {
          if (fail) {
            fail = false;
            throw new Error('points service timed out');
          }
          points.credit(message.userId, 100);
          return { credited: 100 };
        },
      });
    };

    it('credits the same event delivered three times once and replays the result to the copies', async () => {
      const pipeline = pipelineOn(new RedisLedger({ client: redis.client, prefix: redis.prefix }));
      expect(pipeline.mode).toBe('leased');
      const outcomes = [];
      for (const broker of ['b-1', 'b-1', 'b-2'])
        outcomes.push(await pipeline.process(paymentEnvelope(event, broker)));
      expect(outcomes.map((o) => o.kind)).toEqual(['executed', 'duplicate', 'duplicate']);
      expect(outcomes[1]).toMatchObject({ source: 'redelivery', result: { credited: 100 } });
      expect(outcomes[2]).toMatchObject({ source: 'republish' });
      expect(points.credits).toBe(1);
      expect(points.balances.get('user-1')).toBe(100);
    });

    it('marks a failed attempt FAIL and credits once when the redelivery succeeds', async () => {
      const ledger = new RedisLedger({ client: redis.client, prefix: redis.prefix });
      const pipeline = pipelineOn(ledger, true);
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'retry' });
      expect(await ledger.get('points', 'evt-1')).toMatchObject({ status: 'FAIL', attempt: 1 });
      expect(await pipeline.process(paymentEnvelope(event, 'broker-evt-1', 2))).toMatchObject({
        kind: 'executed',
        attempt: 2,
        reclaimed: true,
      });
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'duplicate' });
      expect(points.credits).toBe(1);
    });

    it('claims a leased batch in one script call, runs the handlers in order and answers in-batch copies as duplicates', async () => {
      const inner = new RedisLedger({ client: redis.client, prefix: redis.prefix }).redis;
      const { ledger: counted, calls } = counting(inner);
      const ledger = new RedisLedger({ client: counted, prefix: redis.prefix });
      await ledger.init(); // its self-check sends two SET NX GET of its own
      calls.clear();
      const order: string[] = [];
      const pipeline = createPipeline<never, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: (message) => {
          order.push(message.eventId);
          if (message.eventId === 'evt-50') throw new Error('points service timed out');
          points.credit(message.userId, 100);
        },
        retry: RetryPolicy.none(),
      });
      const batch = Array.from({ length: 100 }, (_, i) => paymentEnvelope({ ...event, eventId: `evt-${i}` }));
      batch.push(paymentEnvelope({ ...event, eventId: 'evt-7' }, 'copy-of-7'));
      const outcomes = await pipeline.processBatch(batch);
      expect(outcomes.slice(0, 100).map((o) => o.kind)).toEqual(
        Array.from({ length: 100 }, (_, i) => (i === 50 ? 'dead' : 'executed')),
      );
      expect(outcomes[100]).toMatchObject({ kind: 'duplicate', key: 'evt-7' });
      expect(order).toEqual(Array.from({ length: 100 }, (_, i) => `evt-${i}`));
      expect(points.credits).toBe(99);
      // The 100 claims in one script call and the copy's claim on its own; the 99 completions, settled
      // while later handlers ran, share a few script calls; the failure record is one more.
      expect(calls.get('setNxGet')).toBe(1);
      expect(calls.get('evalSha')).toBeLessThanOrEqual(5);
    });

    it('refuses at start-up a Redis TTL shorter than the redelivery horizon, naming both', () => {
      const ledger = new RedisLedger({ client: redis.client, prefix: redis.prefix, retention: '1h' });
      expect(() => pipelineOn(ledger)).toThrow(ConfigError);
      expect(() => pipelineOn(ledger)).toThrow(
        /retention 1h is shorter than the redelivery horizon 1d4h45m40s/,
      );
    });

    it('re-applies a completed event once its key has expired: the TTL is the limit of a Redis-only ledger', async () => {
      const ledger = new RedisLedger({ client: redis.client, prefix: redis.prefix, retention: 150 });
      const pipeline = createPipeline<never, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        retry: RetryPolicy.none(),
        replayMargin: 0,
        handler: (message) => {
          points.credit(message.userId, 100);
        },
      });
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'executed' });
      for (let i = 0; i < 100 && (await ledger.get('points', 'evt-1')) !== undefined; i++) await sleep(20);
      expect(await pipeline.process(paymentEnvelope(event))).toMatchObject({ kind: 'executed' });
      expect(points.credits).toBe(2);
    });
  });
});
