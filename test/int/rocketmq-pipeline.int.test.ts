import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, PermanentError, RetryPolicy, type Outcome } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { RocketMQTransport } from 'oncemq/rocketmq';
import { findRocketMQ } from '../support/brokers.js';
import { waitUntil } from '../support/local-points.js';
import { paymentEvents, sleep, type PaymentSucceeded } from '../support/points.js';
import { findPostgres, pointsSchema } from '../support/postgres.js';
import { QUICK_ROCKETMQ } from '../support/rocketmq.js';

const broker = await findRocketMQ();
const postgres = await findPostgres();

describe.skipIf(!broker.available || !postgres.available)(
  'payment-to-points over RocketMQ and PostgreSQL',
  () => {
    let world: Awaited<ReturnType<typeof pointsSchema>>;
    let transport: RocketMQTransport;

    beforeEach(async () => {
      world = await pointsSchema(postgres.url, 6);
      await world.pool.query(`CREATE TABLE "${world.schema}".effects (key text NOT NULL)`);
      transport = new RocketMQTransport({ url: broker.url, ...QUICK_ROCKETMQ });
    });

    afterEach(async () => {
      await transport.close();
      await world.close();
    });

    it('applies every event exactly once through producer duplicates, a flaky handler and a poison message, and keeps the poison listed and replayable', async () => {
      const { pool, schema } = world;
      const id = randomUUID().slice(0, 8);
      const topic = `payments-${id}`;
      const group = `points-${id}`;
      const ledger = new PostgresLedger({ pool, schema });
      await ledger.init();
      const events = paymentEvents(40, 'pay');
      const flaky = 'pay-7';
      const poison = 'pay-13';
      let poisonous = true;
      let flakyFailures = 0;
      const outcomes: Outcome[] = [];
      const pipeline = createPipeline<PgClientLike, PaymentSucceeded>({
        ledger,
        group,
        key: { jsonPath: 'eventId' },
        retry: new RetryPolicy({ delays: ['1s', '1s', '1s'] }),
        onOutcome: (outcome) => outcomes.push(outcome),
        handler: async (event, ctx) => {
          if (event.eventId === poison && poisonous) throw new PermanentError('invalid', 'no such account');
          await ctx.tx.query(`INSERT INTO "${schema}".effects (key) VALUES ($1)`, [event.eventId]);
          await world.addPoints(ctx.tx, event.userId, 100);
          if (event.eventId === flaky && flakyFailures < 2) {
            flakyFailures++;
            throw new Error('the points service hiccuped');
          }
        },
      });
      await transport.subscribe(group, [topic], pipeline, { concurrency: 4, visibility: '5s' });
      await transport.subscribe(group, [topic], pipeline, { concurrency: 4, visibility: '5s' });
      for (const event of events) await transport.publish({ topic, key: event.eventId, body: event });
      // A producer that sends again (its ack was lost) stores second copies: new broker ids, same keys.
      for (const event of events.slice(0, 10))
        await transport.publish({ topic, key: event.eventId, body: event });

      const effects = async (): Promise<Map<string, number>> => {
        const { rows } = await pool.query<{ key: string; n: number }>(
          `SELECT key, COUNT(*)::int AS n FROM "${schema}".effects GROUP BY key`,
        );
        return new Map(rows.map((row) => [row.key, row.n]));
      };
      await waitUntil(
        async () => (await effects()).size === events.length - 1,
        'every event but the poison applied',
        60_000,
      );
      await waitUntil(
        async () => (await transport.deadLetters.list({ group })).length === 1,
        'the poison dead-lettered',
        30_000,
      );
      await waitUntil(
        () => outcomes.filter((outcome) => outcome.kind === 'duplicate').length === 10,
        'the ten resent copies absorbed',
        30_000,
      );

      const [letter] = await transport.deadLetters.list({ group });
      expect(letter).toMatchObject({ key: poison, reason: 'permanent-error', topic, group });
      expect(letter?.error).toMatch(/no such account/);
      expect(flakyFailures).toBe(2);
      const retried = outcomes
        .filter((outcome) => outcome.kind === 'retry' && outcome.key === flaky)
        .map((outcome) => outcome.deliveryCount);
      expect(retried[0]).toBe(1);
      const sources = outcomes.flatMap((outcome) => (outcome.kind === 'duplicate' ? [outcome.source] : []));
      expect(new Set(sources)).toEqual(new Set(['republish']));

      poisonous = false;
      expect(await transport.deadLetters.replay(group, [letter?.id ?? ''])).toBe(1);
      await waitUntil(
        async () => (await effects()).size === events.length,
        'the replayed poison applied',
        30_000,
      );
      await sleep(2000);
      const counts = await effects();
      expect([...counts.keys()].sort()).toEqual(events.map((event) => event.eventId).sort());
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      const { rows } = await pool.query<{ total: number }>(
        `SELECT COALESCE(SUM(balance), 0)::int AS total FROM "${schema}".points`,
      );
      expect(rows[0]?.total).toBe(events.length * 100);
      expect(await transport.deadLetters.list({ group })).toEqual([]);
    });
  },
);
