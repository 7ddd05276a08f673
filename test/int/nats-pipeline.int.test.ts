import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, PermanentError, RetryPolicy, type Outcome } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { NATS_SERVICE, natsUnderTest, type NatsUnderTest } from '../support/nats.js';
import { paymentEvents, sleep, type PaymentSucceeded } from '../support/points.js';
import { findPostgres, pointsSchema } from '../support/postgres.js';
import { findService } from '../support/services.js';

const nats = await findService(NATS_SERVICE);
const postgres = await findPostgres();

async function waitUntil(
  condition: () => Promise<boolean> | boolean,
  what: string,
  limitMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(50);
  }
}

describe.skipIf(!nats.available || !postgres.available)(
  'payment-to-points over NATS JetStream and PostgreSQL',
  () => {
    let world: Awaited<ReturnType<typeof pointsSchema>>;
    let under: NatsUnderTest;

    beforeEach(async () => {
      world = await pointsSchema(postgres.url, 6);
      await world.pool.query(`CREATE TABLE "${world.schema}".effects (key text NOT NULL)`);
      // A short duplicate window, so that a copy published again a moment later is stored twice and the
      // ledger, not the broker, has to absorb it.
      under = await natsUnderTest(nats.url, { duplicateWindow: '100ms' });
    });

    afterEach(async () => {
      await under.transport.close();
      await under.cleanup();
      await world.close();
    });

    it('applies every event exactly once through duplicates, dropped connections, a flaky handler and a poison message, and keeps the poison listed and replayable', async () => {
      const { pool, schema } = world;
      const ledger = new PostgresLedger({ pool, schema });
      await ledger.init();
      const events = paymentEvents(60, 'pay');
      const flaky = 'pay-7';
      const poison = 'pay-13';
      let poisonous = true;
      let flakyFailures = 0;
      const outcomes: Outcome[] = [];
      const pipeline = createPipeline<PgClientLike, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        retry: new RetryPolicy({ delays: ['300ms', '300ms', '300ms'] }),
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
      const { transport } = under;
      await transport.subscribe('points', ['payments'], pipeline, { concurrency: 4, visibility: '2s' });
      await transport.subscribe('points', ['payments'], pipeline, { concurrency: 4, visibility: '2s' });

      for (const [index, event] of events.entries()) {
        await transport.publish({ topic: 'payments', key: event.eventId, body: event });
        if (index === 20 || index === 40) await under.dropConnections();
      }
      await sleep(150);
      // Producer retries after the window: new copies, same keys.
      for (const event of events.slice(0, 10)) {
        const receipt = await transport.publish({ topic: 'payments', key: event.eventId, body: event });
        expect(receipt.duplicate).toBe(false);
      }

      const effects = async (): Promise<Map<string, number>> => {
        const { rows } = await pool.query<{ key: string; n: number }>(
          `SELECT key, COUNT(*)::int AS n FROM "${schema}".effects GROUP BY key`,
        );
        return new Map(rows.map((row) => [row.key, row.n]));
      };
      await waitUntil(
        async () => (await effects()).size === events.length - 1,
        'every event but the poison applied',
      );
      await waitUntil(
        async () => (await transport.deadLetters.list({ group: 'points' })).length === 1,
        'the poison dead-lettered',
      );
      await under.dropConnections();

      const [letter] = await transport.deadLetters.list({ group: 'points' });
      expect(letter).toMatchObject({ key: poison, reason: 'permanent-error', topic: 'payments' });
      expect(letter?.error).toMatch(/no such account/);
      expect(flakyFailures).toBe(2);
      expect(outcomes.some((outcome) => outcome.kind === 'duplicate')).toBe(true);

      poisonous = false;
      expect(await transport.deadLetters.replay('points', [letter?.id ?? ''])).toBe(1);
      await waitUntil(async () => (await effects()).size === events.length, 'the replayed poison applied');
      await sleep(2500); // past the ack wait: any copy still in flight has come back by now
      const counts = await effects();
      expect([...counts.keys()].sort()).toEqual(events.map((event) => event.eventId).sort());
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      const { rows } = await pool.query<{ total: number }>(
        `SELECT COALESCE(SUM(balance), 0)::int AS total FROM "${schema}".points`,
      );
      expect(rows[0]?.total).toBe(events.length * 100);
      expect(await transport.deadLetters.list({ group: 'points' })).toEqual([]);
    });
  },
);
