import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, RetryPolicy, type Subscription } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { EffectChecker } from 'oncemq/testing';
import { findKafka } from '../support/brokers.js';
import { deleteTopics, proxiedKafka, type ProxiedKafka } from '../support/kafka.js';
import { waitUntil } from '../support/local-points.js';
import { paymentEvents, sleep, type PaymentSucceeded } from '../support/points.js';
import { findPostgres, pointsSchema, type PointsSchema } from '../support/postgres.js';

const kafka = await findKafka();
const postgres = await findPostgres();

const EVENTS = 120;

describe.skipIf(!kafka.available || !postgres.available)(
  'payment-to-points over Kafka with a PostgreSQL ledger (transactional)',
  () => {
    let world: PointsSchema;
    let proxied: ProxiedKafka;
    let topic: string;
    let group: string;
    const subscriptions: Subscription[] = [];

    beforeEach(async () => {
      world = await pointsSchema(postgres.url, 8);
      await world.pool.query(`CREATE TABLE "${world.schema}".applied (event_id text NOT NULL)`);
      proxied = await proxiedKafka(kafka.bootstrap);
      topic = `payments-${randomUUID().slice(0, 8)}`;
      group = `points-${randomUUID().slice(0, 8)}`;
    });

    afterEach(async () => {
      await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
      await proxied.close();
      await deleteTopics(kafka.bootstrap, [topic]).catch(() => undefined);
      await world.close();
    });

    const appliedCounts = async (): Promise<Map<string, number>> => {
      const { rows } = await world.pool.query<{ event_id: string; n: number }>(
        `SELECT event_id, COUNT(*)::int AS n FROM "${world.schema}".applied GROUP BY event_id`,
      );
      return new Map(rows.map((row) => [row.event_id, row.n]));
    };

    it('applies every event once through duplicates, dropped connections, a flaky handler and a poison message, which goes to the dead-letter topic with its reason, is listed and replayed', async () => {
      const { transport } = proxied;
      const ledger = new PostgresLedger({ pool: world.pool, schema: world.schema });
      await ledger.init();
      const checker = new EffectChecker();
      let flakyFailures = 0;
      let poisoned = true;
      const pipeline = createPipeline<PgClientLike, PaymentSucceeded>({
        ledger,
        group,
        key: { jsonPath: 'eventId' },
        retry: new RetryPolicy({ name: 'test', delays: ['50ms', '50ms'] }),
        onOutcome: (outcome) => {
          checker.observe(outcome);
        },
        handler: async (event, ctx) => {
          if (event.eventId === 'evt-flaky' && flakyFailures < 2) {
            flakyFailures++;
            throw new Error('points service timed out');
          }
          if (event.eventId === 'evt-poison' && poisoned) throw new Error('user-9 does not exist');
          await world.addPoints(ctx.tx, event.userId, 100);
          await ctx.tx.query(`INSERT INTO "${world.schema}".applied (event_id) VALUES ($1)`, [event.eventId]);
        },
      });
      // Two members: one takes batches (processBatch), the other one record at a time.
      subscriptions.push(await transport.subscribe(group, [topic], pipeline, { concurrency: 8 }));
      subscriptions.push(
        await transport.subscribe(group, [topic], pipeline, { concurrency: 8, batchSize: 1 }),
      );

      const events = [
        ...paymentEvents(EVENTS),
        { eventId: 'evt-flaky', orderId: 'order-flaky', userId: 'user-0', amount: 100 },
        { eventId: 'evt-poison', orderId: 'order-poison', userId: 'user-9', amount: 100 },
      ];
      for (const event of events) checker.published(event.eventId);
      for (const [index, event] of events.entries()) {
        // Every event twice, as a producer retry would: the same key, another stored copy.
        await transport.publish({ topic, key: event.eventId, body: event });
        await transport.publish({ topic, key: event.eventId, body: event });
        if (process.env.NODROP === undefined && index % 50 === 25) await proxied.dropConnections();
      }
      await waitUntil(
        async () => (await appliedCounts()).size === events.length - 1,
        'every good event applied',
        60_000,
      );
      // At least both copies: a dead letter may be listed twice (a copy redelivered after a dropped
      // connection, before its offset was committed, is dead-lettered again), never lost.
      await waitUntil(
        async () => (await transport.deadLetters.list({ group })).length >= 2,
        'both copies of the poison dead-lettered',
      );
      const letters = await transport.deadLetters.list({ group });
      for (const letter of letters) {
        expect(letter).toMatchObject({
          key: 'evt-poison',
          topic,
          reason: 'retries-exhausted',
          deliveryCount: 3,
        });
        expect(letter.error).toMatch(/user-9 does not exist/);
        expect(letter.headers['oncemq-original-partition']).toMatch(/^\d+$/);
        expect(letter.headers['oncemq-original-offset']).toMatch(/^\d+$/);
        checker.deadLettered(letter.key, letter.reason);
      }

      poisoned = false;
      expect(
        await transport.deadLetters.replay(
          group,
          letters.map((letter) => letter.id),
        ),
      ).toBe(letters.length);
      await waitUntil(async () => (await appliedCounts()).has('evt-poison'), 'the replayed poison applied');
      await sleep(500);
      for (const [key, count] of await appliedCounts()) checker.effect(key, count);
      const report = checker.report();
      expect(report).toMatchObject({ doubleEffects: 0, lostEffects: 0, ok: true });
      expect(flakyFailures).toBe(2);
      expect(proxied.proxy.dropped).toBeGreaterThanOrEqual(3);
      expect(report.duplicates.republish + report.duplicates.redelivery).toBeGreaterThanOrEqual(EVENTS);
      expect(await transport.deadLetters.list({ group })).toEqual([]);
      let total = 0;
      for (let user = 0; user < 7; user++) total += await world.balance(`user-${user}`);
      expect(total + (await world.balance('user-9'))).toBe(100 * events.length);
    });
  },
);
