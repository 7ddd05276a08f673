// Per-key ordered consumption end to end on a real transport: orders move through create → pay →
// ship, keyed by event id and ordered by order id, into PostgreSQL. Every effect row records the step
// it applied and the step the order was at when it ran, so an effect applied out of order — before
// the previous step committed, or after a later one — shows in the table.
import { expect } from 'vitest';
import {
  createPipeline,
  RetryPolicy,
  type DeadLetter,
  type OutgoingMessage,
  type Processor,
  type Subscription,
} from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { FaultInjector } from 'oncemq/testing';
import { sleep, waitFor } from './internal.js';
import { dropSchema, newPool, scratchSchema } from './postgres.js';

interface OrderEvent {
  readonly eventId: string;
  readonly orderId: string;
  readonly step: number;
}

const STEPS = ['create', 'pay', 'ship'] as const;

/** What a transport gives the scenario. */
export interface OrderedTransport {
  readonly topic: string;
  readonly group: string;
  publish(message: OutgoingMessage): Promise<unknown>;
  /** Starts member `member` of the group (a transport of its own: another process's) with ordering on. */
  subscribe(member: number, processor: Processor): Promise<Subscription>;
  /** Cuts the members' connections once, mid-run. */
  dropConnections(): void | Promise<void>;
  deadLetters(): Promise<readonly DeadLetter[]>;
}

export interface OrderedScenarioOptions {
  readonly postgresUrl: string;
  /** @default 600 (1800 events) */
  readonly orders?: number;
  /** Orders published together, each through its three steps, before the next wave. @default 50 */
  readonly wave?: number;
  /** @default 120_000 */
  readonly limitMs?: number;
}

/** What the run saw, for the caller's own assertions. */
export interface OrderedScenarioResult {
  readonly effects: number;
  readonly handlerCrashes: number;
  /** Deliveries each member processed. */
  readonly byMember: ReadonlyMap<number, number>;
  readonly deadLetters: readonly DeadLetter[];
}

/**
 * Publishes `orders` orders in waves while members 0 and 1 consume with ordering on; a third of the
 * way it drops the connections, two thirds of the way it closes member 0 and starts member 2. One
 * order's pay event is poison (a body that does not decode). Handlers crash now and then (the fault
 * injector). Checks that every effect ran once, in order per order, and that the poison was
 * dead-lettered while its order went on.
 */
export async function runOrderedScenario(
  transport: OrderedTransport,
  options: OrderedScenarioOptions,
): Promise<OrderedScenarioResult> {
  const orders = options.orders ?? 600;
  const wave = options.wave ?? 50;
  const limitMs = options.limitMs ?? 120_000;
  const poisonOrder = `order-${Math.floor(orders / 2) + 3}`;
  const schema = scratchSchema('oncemq_ord');
  const pool = newPool(options.postgresUrl, 8);
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(
    `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, order_id text NOT NULL, step int NOT NULL, previous int NOT NULL)`,
  );
  const ledger = new PostgresLedger({ pool, schema });
  await ledger.init();
  const injector = new FaultInjector({
    seed: 11,
    faults: ['handler-crash'],
    rates: { 'handler-crash': 0.05 },
  });
  const pipeline = createPipeline<PgClientLike, OrderEvent>({
    ledger,
    group: transport.group,
    key: { jsonPath: 'eventId' },
    retry: new RetryPolicy({ name: 'ordered', delays: ['20ms', '50ms', '100ms', '200ms', '200ms'] }),
    handler: async (event, ctx) => {
      injector.handlerCrash(event.eventId);
      const { rows } = (await ctx.tx.query(
        `SELECT COALESCE(MAX(step), 0)::int AS step FROM "${schema}".effects WHERE order_id = $1`,
        [event.orderId],
      )) as { rows: { step: number }[] };
      await ctx.tx.query(`INSERT INTO "${schema}".effects (order_id, step, previous) VALUES ($1, $2, $3)`, [
        event.orderId,
        event.step,
        rows[0]?.step ?? 0,
      ]);
    },
  });
  const members = new Map<number, Subscription>();
  const byMember = new Map<number, number>();
  const start = async (member: number): Promise<void> => {
    const processor: Processor = {
      process: (envelope) => {
        byMember.set(member, (byMember.get(member) ?? 0) + 1);
        return pipeline.process(envelope);
      },
    };
    members.set(member, await transport.subscribe(member, processor));
  };
  try {
    for (const member of [0, 1]) await start(member);
    const waves = Math.ceil(orders / wave);
    for (let w = 0; w < waves; w++) {
      if (w === Math.floor(waves / 3)) await transport.dropConnections();
      if (w === Math.floor((2 * waves) / 3)) {
        await members.get(0)?.close();
        members.delete(0);
        await start(2);
      }
      const ids = Array.from(
        { length: Math.min(wave, orders - w * wave) },
        (_, i) => `order-${w * wave + i}`,
      );
      for (const [index, name] of STEPS.entries()) {
        await Promise.all(
          ids.map((orderId) => {
            const eventId = `${orderId}-${name}`;
            const event: OrderEvent = { eventId, orderId, step: index + 1 };
            const poison = orderId === poisonOrder && name === 'pay';
            return transport.publish({
              topic: transport.topic,
              key: eventId,
              orderingKey: orderId,
              body: poison ? '{"eventId": ' : event,
            });
          }),
        );
      }
    }
    const expected = orders * STEPS.length - 1;
    const count = async (): Promise<number> =>
      (await pool.query<{ n: number }>(`SELECT COUNT(*)::int AS n FROM "${schema}".effects`)).rows[0]?.n ?? 0;
    await waitFor(async () => (await count()) >= expected, `${expected} effects`, limitMs);
    await waitFor(
      async () => (await transport.deadLetters()).length >= 1,
      'the poison dead-lettered',
      limitMs,
    );
    // Redeliveries still on their way would show as doubles now.
    await sleep(1_000);

    const { rows } = await pool.query<{ order_id: string; steps: number[]; previous: number[] }>(
      `SELECT order_id, array_agg(step ORDER BY seq) AS steps, array_agg(previous ORDER BY seq) AS previous ` +
        `FROM "${schema}".effects GROUP BY order_id`,
    );
    expect(rows).toHaveLength(orders);
    const wrong = rows.filter((row) => {
      const want = row.order_id === poisonOrder ? [1, 3] : [1, 2, 3];
      const before = [0, ...want.slice(0, -1)];
      return (
        JSON.stringify(row.steps) !== JSON.stringify(want) ||
        JSON.stringify(row.previous) !== JSON.stringify(before)
      );
    });
    expect(wrong.slice(0, 5)).toEqual([]);
    expect(await count()).toBe(expected);
    // The poison, dead-lettered once per copy: a copy that comes again after a dropped connection (its
    // offset or ack lost after the dead letter was stored) claims nothing and is dead-lettered again.
    const deadLetters = await transport.deadLetters();
    expect(deadLetters.length).toBeGreaterThanOrEqual(1);
    for (const letter of deadLetters) {
      expect(letter).toMatchObject({
        reason: 'malformed',
        group: transport.group,
        key: `${poisonOrder}-pay`,
      });
    }
    const handlerCrashes = injector.counts()['handler-crash'];
    expect(handlerCrashes).toBeGreaterThan(0);
    // The work moved between members: at least two of them processed deliveries.
    expect([...byMember.values()].filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
    return { effects: expected, handlerCrashes, deadLetters, byMember };
  } finally {
    await Promise.all([...members.values()].map((member) => member.close()));
    await dropSchema(pool, schema).catch(() => undefined);
    await ledger.close();
    await pool.end();
  }
}

/** Orders applied step by step into PostgreSQL, for tests that drive the publishing themselves. */
export interface OrderSteps {
  /** The group's pipeline: applies one step of an order in the ledger's transaction. */
  readonly pipeline: Processor;
  /** The message of step `step` (1, 2, 3 …) of `orderId`. */
  message(topic: string, orderId: string, step: number): OutgoingMessage;
  /** Effect rows so far. */
  count(): Promise<number>;
  /** Orders whose effects are not exactly steps 1 … `steps`, each applied after the one before. */
  wrong(steps: number): Promise<{ order_id: string; steps: number[]; previous: number[] }[]>;
  close(): Promise<void>;
}

/** A scratch schema and ledger whose pipeline records each step and the step the order was at. */
export async function orderSteps(postgresUrl: string, group: string, stepMs = 0): Promise<OrderSteps> {
  const schema = scratchSchema('oncemq_ord');
  const pool = newPool(postgresUrl, 8);
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(
    `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, order_id text NOT NULL, step int NOT NULL, previous int NOT NULL)`,
  );
  const ledger = new PostgresLedger({ pool, schema });
  await ledger.init();
  const pipeline = createPipeline<PgClientLike, OrderEvent>({
    ledger,
    group,
    key: { jsonPath: 'eventId' },
    retry: new RetryPolicy({ name: 'ordered', delays: ['20ms', '50ms', '100ms'] }),
    handler: async (event, ctx) => {
      const { rows } = (await ctx.tx.query(
        `SELECT COALESCE(MAX(step), 0)::int AS step FROM "${schema}".effects WHERE order_id = $1`,
        [event.orderId],
      )) as { rows: { step: number }[] };
      if (stepMs > 0) await sleep(stepMs);
      await ctx.tx.query(`INSERT INTO "${schema}".effects (order_id, step, previous) VALUES ($1, $2, $3)`, [
        event.orderId,
        event.step,
        rows[0]?.step ?? 0,
      ]);
    },
  });
  return {
    pipeline,
    message: (topic, orderId, step) => {
      const event: OrderEvent = { eventId: `${orderId}-${step}`, orderId, step };
      return { topic, key: event.eventId, orderingKey: orderId, body: event };
    },
    count: async () =>
      (await pool.query<{ n: number }>(`SELECT COUNT(*)::int AS n FROM "${schema}".effects`)).rows[0]?.n ?? 0,
    wrong: async (steps) => {
      const { rows } = await pool.query<{ order_id: string; steps: number[]; previous: number[] }>(
        `SELECT order_id, array_agg(step ORDER BY seq) AS steps, array_agg(previous ORDER BY seq) AS previous ` +
          `FROM "${schema}".effects GROUP BY order_id`,
      );
      const want = Array.from({ length: steps }, (_, i) => i + 1);
      const before = [0, ...want.slice(0, -1)];
      return rows.filter(
        (row) =>
          JSON.stringify(row.steps) !== JSON.stringify(want) ||
          JSON.stringify(row.previous) !== JSON.stringify(before),
      );
    },
    close: async () => {
      await dropSchema(pool, schema).catch(() => undefined);
      await ledger.close();
      await pool.end();
    },
  };
}
