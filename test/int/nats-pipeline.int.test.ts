import { jetstream } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, PermanentError, RetryPolicy, type Outcome } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { directConnection, NATS_SERVICE, natsUnderTest, type NatsUnderTest } from '../support/nats.js';
import { paymentEvents, sleep, type PaymentSucceeded } from '../support/points.js';
import { findPostgres, pointsSchema } from '../support/postgres.js';
import { findService } from '../support/services.js';
import { waitUntil } from '../support/local-points.js';

const nats = await findService(NATS_SERVICE);
const postgres = await findPostgres();

describe.skipIf(!nats.available || !postgres.available)(
  'payment-to-points over NATS JetStream and PostgreSQL',
  () => {
    let world: Awaited<ReturnType<typeof pointsSchema>>;
    let under: NatsUnderTest;

    beforeEach(async () => {
      world = await pointsSchema(postgres.url, 6);
      await world.pool.query(`CREATE TABLE "${world.schema}".effects (key text NOT NULL)`);
      under = await natsUnderTest(nats.url);
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
      // Inside the window the server drops a resend of a key; a producer that sends no Nats-Msg-Id
      // (or resends after the window) stores second copies, which the ledger has to absorb.
      const again = await transport.publish({ topic: 'payments', key: 'pay-0', body: events[0] ?? {} });
      expect(again.duplicate).toBe(true);
      const producer = await directConnection(nats.url);
      try {
        const js = jetstream(producer);
        for (const event of events.slice(0, 10)) {
          const headers = natsHeaders();
          headers.set('oncemq-key', event.eventId);
          await js.publish(`${under.subjectPrefix}.payments`, JSON.stringify(event), { headers });
        }
      } finally {
        await producer.close();
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
        60_000,
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

    it('keeps a handler running past the ack wait on its delivery: no other member gets a copy meanwhile', async () => {
      const { pool, schema } = world;
      const ledger = new PostgresLedger({ pool, schema });
      await ledger.init();
      const outcomes: Outcome[] = [];
      let runs = 0;
      const pipeline = createPipeline<PgClientLike, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        onOutcome: (outcome) => outcomes.push(outcome),
        handler: async (event, ctx) => {
          runs++;
          await sleep(3500); // more than three ack waits: only the lease keeper's working() holds it
          await world.addPoints(ctx.tx, event.userId, 100);
        },
      });
      const { transport } = under;
      for (let member = 0; member < 2; member++) {
        await transport.subscribe('points', ['payments'], pipeline, { concurrency: 2, visibility: '1s' });
      }
      const [event] = paymentEvents(1, 'long');
      await transport.publish({ topic: 'payments', key: event?.eventId ?? '', body: event ?? {} });
      await waitUntil(() => Promise.resolve(outcomes.length >= 1), 'the long delivery settled', 20_000);
      await sleep(1500);
      // A copy delivered meanwhile would show as a busy outcome (the claim is held) or a second run.
      expect(outcomes.map((outcome) => outcome.kind)).toEqual(['executed']);
      expect(runs).toBe(1);
    });
  },
);
