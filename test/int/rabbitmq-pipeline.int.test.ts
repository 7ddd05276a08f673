// Payment-to-points end to end: RabbitMQ (through a proxy that drops connections) → the pipeline →
// a transactional PostgreSQL ledger. Every event's effect is counted per key.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, RetryPolicy, type Outcome, type Pipeline } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import type { RabbitTransport } from 'oncemq/rabbitmq';
import { sleep, waitFor } from '../support/internal.js';
import { paymentEvents, type PaymentSucceeded } from '../support/points.js';
import { findPostgres, pointsSchema, type PointsSchema } from '../support/postgres.js';
import { findRabbit, rabbitWorld, type RabbitWorld } from '../support/rabbitmq.js';

const rabbit = await findRabbit();
const postgres = await findPostgres();

describe.skipIf(!rabbit.available || !postgres.available)('payment-to-points over RabbitMQ', () => {
  let world: RabbitWorld;
  let db: PointsSchema;

  beforeEach(async () => {
    world = await rabbitWorld(rabbit.url, { delayLevels: ['100ms', '200ms', '1s'] });
    db = await pointsSchema(postgres.url, 8);
    await db.pool.query(`CREATE TABLE "${db.schema}".effects (key text NOT NULL)`);
  });

  afterEach(async () => {
    await world.cleanup();
    await db.close();
  });

  async function effects(): Promise<Map<string, number>> {
    const { rows } = await db.pool.query<{ key: string; n: number }>(
      `SELECT key, COUNT(*)::int AS n FROM "${db.schema}".effects GROUP BY key`,
    );
    return new Map(rows.map((row) => [row.key, row.n]));
  }

  /** The points consumer: +100 points and one effect row per event, in the claim's transaction. */
  function consumer(ledger: PostgresLedger, failures: Map<string, number>, outcomes: Outcome[]): Pipeline {
    return createPipeline<PgClientLike, PaymentSucceeded>({
      ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      retry: RetryPolicy.exponential({ base: '100ms', max: '200ms', count: 3 }),
      onOutcome: (outcome) => outcomes.push(outcome),
      handler: async (event, ctx) => {
        await db.addPoints(ctx.tx, event.userId, 100);
        await ctx.tx.query(`INSERT INTO "${db.schema}".effects (key) VALUES ($1)`, [event.eventId]);
        const left = failures.get(event.eventId) ?? 0;
        if (left > 0) {
          failures.set(event.eventId, left - 1);
          throw new Error(`${event.eventId} failed on purpose`);
        }
      },
    });
  }

  it('applies every event once through duplicates, dropped connections, a flaky handler and a poison message', async () => {
    const events = paymentEvents(60, 'pay');
    const flaky = 'pay-7';
    const poison = 'pay-13';
    // The flaky event fails twice, then succeeds; the poison one fails every time.
    const failures = new Map([
      [flaky, 2],
      [poison, Number.MAX_SAFE_INTEGER],
    ]);
    const outcomes: Outcome[] = [];
    const ledger = new PostgresLedger({ pool: db.pool, schema: db.schema });
    await ledger.init();
    const members: RabbitTransport[] = [world.open(), world.open()];
    const pipeline = consumer(ledger, failures, outcomes);
    for (const member of members) {
      await member.subscribe('points', ['payment-succeeded'], pipeline, { concurrency: 8 });
    }
    const publish = (event: PaymentSucceeded) =>
      world.transport.publish({ topic: 'payment-succeeded', key: event.eventId, body: event });
    for (const [index, event] of events.entries()) {
      await publish(event);
      // A producer retry after a lost confirm: another stored copy of the same event.
      if (index % 4 === 0) await publish(event);
      if (index === 20 || index === 40) world.proxy.dropConnections();
    }
    const healthy = events.filter((event) => event.eventId !== poison);
    await waitFor(
      async () => {
        const counted = await effects();
        const dead = await world.transport.deadLetters.list({ group: 'points' });
        return healthy.every((event) => counted.has(event.eventId)) && dead.length > 0;
      },
      'every healthy event applied and the poison dead-lettered',
      30_000,
    );
    world.proxy.dropConnections();
    await sleep(1500);

    const counted = await effects();
    expect(healthy.filter((event) => counted.get(event.eventId) !== 1)).toEqual([]);
    expect(counted.has(poison)).toBe(false);
    expect(await db.balance('user-0')).toBe(
      100 * healthy.filter((event) => event.userId === 'user-0').length,
    );
    expect(outcomes.some((o) => o.kind === 'duplicate' && o.source === 'republish')).toBe(true);
    expect(outcomes.filter((o) => o.key === flaky).map((o) => o.kind)).toEqual(
      expect.arrayContaining(['retry', 'retry', 'executed']),
    );

    // A connection dropped between a dead letter's confirm and the original's ack dead-letters the
    // poison twice (every hop is at least once): every letter is the poison's, with why.
    const letters = await world.transport.deadLetters.list({ group: 'points' });
    for (const letter of letters) {
      expect(letter).toMatchObject({ key: poison, reason: 'retries-exhausted', deliveryCount: 4 });
      expect(letter.error).toMatch(/pay-13 failed on purpose/);
    }

    // Fixed: the replayed poison is applied once, however many copies were replayed.
    failures.delete(poison);
    const ids = letters.map((letter) => letter.id);
    expect(await world.transport.deadLetters.replay('points', ids)).toBe(ids.length);
    await waitFor(async () => (await effects()).get(poison) === 1, 'the replayed event applied', 15_000);
    await sleep(1500);
    const late = (await world.transport.deadLetters.list({ group: 'points' })).map((letter) => letter.id);
    expect(await world.transport.deadLetters.replay('points', late)).toBe(late.length);
    await sleep(1000);
    expect((await effects()).get(poison)).toBe(1);
    expect(await world.transport.deadLetters.list({ group: 'points' })).toEqual([]);
  }, 90_000); // its own waits add up to 45 s past the sleeps: the default 30 s cut it short on a loaded machine
});
