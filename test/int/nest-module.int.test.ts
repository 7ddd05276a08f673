// OncemqModule in a real Nest application: consumers declared with @OncemqConsumer on providers,
// RabbitMQ as the transport, a PostgreSQL ledger; bootstrap subscribes, app.close() drains.
// Decorators compile with `experimentalDecorators` (tsconfig.json); vitest's esbuild emits no
// design-type metadata, so every constructor parameter names its token with @Inject.
import { Inject, Injectable, Module, Scope, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import amqplib from 'amqplib';
import knexFactory, { type Knex } from 'knex';
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ClosedError, ConfigError, type HandlerContext, type Outbox, type Outcome } from 'oncemq';
import {
  InjectOutbox,
  OncemqConsumer,
  OncemqModule,
  ONCEMQ_LEDGER,
  ONCEMQ_OUTBOX,
  ONCEMQ_TRANSPORT,
  type OncemqModuleConfig,
} from 'oncemq/nest';
import { knexLedger } from 'oncemq/knex';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { RabbitTransport } from 'oncemq/rabbitmq';
import { sleep, waitFor } from '../support/internal.js';
import { paymentEvents, type PaymentSucceeded } from '../support/points.js';
import { findPostgres, pointsSchema, type PointsSchema } from '../support/postgres.js';
import { deleteTopology, findRabbit, scratchPrefix } from '../support/rabbitmq.js';

const rabbit = await findRabbit();
const postgres = await findPostgres();

const POOL = 'test:pool';
const DB = 'test:db';
const PROBE = 'test:probe';

/** Probes made by the running test; a failed test's held handler is released before its app closes. */
const probes = new Set<Probe>();

/** What a test watches from inside the application: outcomes, and a handler it can hold. */
class Probe {
  readonly outcomes: Outcome[] = [];
  /** The event whose handler waits for `release()` after its writes. */
  holdKey: string | undefined;
  #entered: (() => void) | undefined;
  readonly entered = new Promise<void>((resolve) => (this.#entered = resolve));
  #release: (() => void) | undefined;
  readonly released = new Promise<void>((resolve) => (this.#release = resolve));
  finishedHeld = false;

  constructor() {
    probes.add(this);
  }

  async maybeHold(eventId: string): Promise<void> {
    if (eventId !== this.holdKey) return;
    this.#entered?.();
    await this.released;
    this.finishedHeld = true;
  }

  release(): void {
    this.#release?.();
  }
}

/** The payment-to-points consumer: +100 points and one effect row per event, in the claim's transaction. */
@Injectable()
class PointsConsumer {
  constructor(
    @Inject(DB) private readonly db: PointsSchema,
    @Inject(PROBE) private readonly probe: Probe,
  ) {}

  @OncemqConsumer<PaymentSucceeded>({
    group: 'points',
    topics: 'payment-succeeded',
    key: { jsonPath: 'eventId' },
    subscribe: { concurrency: 4 },
    retry: { delays: ['100ms'], immediate: 0 },
  })
  async credit(event: PaymentSucceeded, ctx: HandlerContext<PgClientLike>): Promise<string> {
    await this.db.addPoints(ctx.tx, event.userId, 100);
    await ctx.tx.query(`INSERT INTO "${this.db.schema}".effects (key) VALUES ($1)`, [event.eventId]);
    await this.probe.maybeHold(event.eventId);
    return `credited ${event.userId}`;
  }
}

/** A standalone application, quiet, whose bootstrap errors reject instead of aborting the process. */
function createContext(module: Type): Promise<INestApplicationContext> {
  // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- Nest's options are a plain object
  return NestFactory.createApplicationContext(module, { logger: false, abortOnError: false });
}

async function effects(db: PointsSchema): Promise<Map<string, number>> {
  const { rows } = await db.pool.query<{ key: string; n: number }>(
    `SELECT key, COUNT(*)::int AS n FROM "${db.schema}".effects GROUP BY key`,
  );
  return new Map(rows.map((row) => [row.key, row.n]));
}

/** Messages ready in a queue and consumers on it, read on a connection of the test's own. */
async function queueState(url: string, queue: string): Promise<{ messages: number; consumers: number }> {
  const connection = await amqplib.connect(url);
  try {
    const channel = await connection.createChannel();
    const state = await channel.checkQueue(queue);
    await channel.close();
    return { messages: state.messageCount, consumers: state.consumerCount };
  } finally {
    await connection.close();
  }
}

describe.skipIf(!rabbit.available || !postgres.available)('OncemqModule in a Nest application', () => {
  let db: PointsSchema;
  let prefix: string;
  const transports: RabbitTransport[] = [];
  const apps: INestApplicationContext[] = [];

  const rabbitTransport = (): RabbitTransport => {
    const transport = new RabbitTransport({
      url: rabbit.url,
      prefix,
      exchange: prefix,
      retention: false,
      delayLevels: ['100ms', '1s'],
    });
    transports.push(transport);
    return transport;
  };

  beforeEach(async () => {
    prefix = scratchPrefix();
    db = await pointsSchema(postgres.url, 8);
    await db.pool.query(`CREATE TABLE "${db.schema}".effects (key text NOT NULL)`);
  });

  afterEach(async () => {
    for (const probe of probes) probe.release();
    probes.clear();
    await Promise.all(apps.splice(0).map((app) => app.close().catch(() => undefined)));
    await Promise.all(transports.map((transport) => transport.close().catch(() => undefined)));
    const queues = new Set(transports.flatMap((t) => [...t.declared.queues]));
    const exchanges = new Set(transports.flatMap((t) => [...t.declared.exchanges]));
    transports.length = 0;
    await deleteTopology(rabbit.url, { queues, exchanges });
    await db.close();
  });

  /** An application whose database module provides the pool, and the oncemq module built from it. */
  async function start(
    config: (pool: pg.Pool) => OncemqModuleConfig<PgClientLike>,
    providers: unknown[],
    probe: Probe,
  ): Promise<INestApplicationContext> {
    @Module({ providers: [{ provide: POOL, useValue: db.pool }], exports: [POOL] })
    class DatabaseModule {}

    @Module({
      imports: [
        DatabaseModule,
        OncemqModule.forRootAsync<PgClientLike>({
          imports: [DatabaseModule],
          inject: [POOL],
          useFactory: config,
        }),
      ],
      providers: [{ provide: DB, useValue: db }, { provide: PROBE, useValue: probe }, ...(providers as [])],
    })
    class AppModule {}

    const app = await createContext(AppModule);
    apps.push(app);
    return app;
  }

  it('applies each event once through duplicates, and app.close() lets a delivery mid-handler finish and be acked', async () => {
    const probe = new Probe();
    const events = paymentEvents(40, 'pay');
    const held = events[events.length - 1];
    if (held === undefined) throw new Error('no events');
    probe.holdKey = held.eventId;
    const app = await start(
      (pool) => ({
        // Functions: the module creates them, and closes them at shutdown.
        ledger: () => new PostgresLedger({ pool, schema: db.schema }),
        transport: rabbitTransport,
        consumerDefaults: { onOutcome: (outcome) => probe.outcomes.push(outcome) },
      }),
      [PointsConsumer],
      probe,
    );
    const transport = app.get<RabbitTransport>(ONCEMQ_TRANSPORT);
    const ledger = app.get<PostgresLedger>(ONCEMQ_LEDGER);
    const queue = transport.names.work('points');
    expect((await queueState(rabbit.url, queue)).consumers).toBe(1);

    const publish = (event: PaymentSucceeded) =>
      transport.publish({ topic: 'payment-succeeded', key: event.eventId, body: event });
    const others = events.filter((event) => event !== held);
    for (const [index, event] of others.entries()) {
      await publish(event);
      // Every third event is sent twice, as a producer retrying after a lost confirm would.
      if (index % 3 === 0) await publish(event);
    }
    await waitFor(
      async () => {
        const counted = await effects(db);
        return others.every((event) => counted.has(event.eventId));
      },
      'every event applied',
      20_000,
    );
    // The last one is still in its handler when the application closes (alone: a transport that
    // hands deliveries over in batches would hold its batch-mates in the same transaction).
    await publish(held);
    await probe.entered;

    let closed = false;
    const closing = app.close().then(() => (closed = true));
    await sleep(500);
    // The held delivery is still in its handler: the application does not close under it.
    expect(closed).toBe(false);
    expect(probe.finishedHeld).toBe(false);
    probe.release();
    await closing;

    expect(probe.finishedHeld).toBe(true);
    const counted = await effects(db);
    expect(events.filter((event) => counted.get(event.eventId) !== 1)).toEqual([]);
    expect(await db.balance('user-0')).toBe(100 * events.filter((event) => event.userId === 'user-0').length);
    expect(probe.outcomes.filter((outcome) => outcome.kind === 'duplicate').length).toBeGreaterThan(0);
    expect(
      probe.outcomes
        .filter((outcome) => outcome.kind === 'executed')
        .map((o) => o.key)
        .sort(),
    ).toEqual(events.map((event) => event.eventId).sort());
    // The held delivery was acked before the channel closed: nothing is back in the queue, and no
    // consumer is left on it.
    expect(await queueState(rabbit.url, queue)).toEqual({ messages: 0, consumers: 0 });
    expect((await queueState(rabbit.url, transport.names.dead('points'))).messages).toBe(0);
    // The transport and ledger the module made are closed with it.
    await expect(ledger.get('points', held.eventId)).rejects.toBeInstanceOf(ClosedError);
    await expect(
      transport.publish({ topic: 'payment-succeeded', key: 'late', body: { eventId: 'late' } }),
    ).rejects.toBeInstanceOf(ClosedError);
  }, 60_000);

  it('drains its consumers off a transport the application passed in, and leaves it and the ledger open', async () => {
    const probe = new Probe();
    const ledger = new PostgresLedger({ pool: db.pool, schema: db.schema });
    const transport = rabbitTransport();
    const app = await start(() => ({ ledger, transport }), [PointsConsumer], probe);
    expect(app.get(ONCEMQ_LEDGER)).toBe(ledger);
    expect(app.get(ONCEMQ_TRANSPORT)).toBe(transport);
    // No outbox configured: its token holds undefined.
    expect(app.get(ONCEMQ_OUTBOX)).toBeUndefined();
    const [event] = paymentEvents(1, 'own');
    if (event === undefined) throw new Error('no event');
    probe.holdKey = event.eventId;
    await transport.publish({ topic: 'payment-succeeded', key: event.eventId, body: event });
    await probe.entered;

    let closed = false;
    const closing = app.close().then(() => (closed = true));
    await sleep(500);
    // Nothing closes the transport here: only the module's own drain holds app.close() back.
    expect(closed).toBe(false);
    probe.release();
    await closing;

    expect(probe.finishedHeld).toBe(true);
    expect(await queueState(rabbit.url, transport.names.work('points'))).toEqual({
      messages: 0,
      consumers: 0,
    });
    expect((await effects(db)).get(event.eventId)).toBe(1);
    expect((await ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
    expect(await transport.publish({ topic: 'payment-succeeded', key: 'after', body: {} })).toMatchObject({
      topic: 'payment-succeeded',
    });
    await ledger.close();
  });

  it('gives consumers ctx.outbox and services the outbox; the relay publishes what committed, once per key', async () => {
    const probe = new Probe();

    /** An application service writing an order and its event in one transaction. */
    @Injectable()
    class OrdersService {
      constructor(
        @Inject(POOL) private readonly pool: pg.Pool,
        @InjectOutbox() private readonly outbox: Outbox<PgClientLike>,
      ) {}

      async place(orderId: string): Promise<void> {
        const client = await this.pool.connect();
        try {
          await client.query('BEGIN');
          await client.query(`INSERT INTO "${db.schema}".effects (key) VALUES ($1)`, [`order:${orderId}`]);
          await this.outbox.add(client, { topic: 'order-placed', key: orderId, body: { orderId } });
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        } finally {
          client.release();
        }
      }
    }

    @Injectable()
    class InvoiceConsumer {
      @OncemqConsumer<{ orderId: string }>({ group: 'invoices', topics: ['order-placed'] })
      async invoice(event: { orderId: string }, ctx: HandlerContext<PgClientLike>): Promise<void> {
        await ctx.tx.query(`INSERT INTO "${db.schema}".effects (key) VALUES ($1)`, [
          `invoice:${event.orderId}`,
        ]);
        await ctx.outbox.add({ topic: 'invoice-issued', key: `invoice-${event.orderId}`, body: event });
      }

      @OncemqConsumer<{ orderId: string }>({ group: 'mailer', topics: 'invoice-issued' })
      async mail(event: { orderId: string }, ctx: HandlerContext<PgClientLike>): Promise<void> {
        await ctx.tx.query(`INSERT INTO "${db.schema}".effects (key) VALUES ($1)`, [`mail:${event.orderId}`]);
      }
    }

    const app = await start(
      (pool) => ({
        ledger: () => new PostgresLedger({ pool, schema: db.schema }),
        transport: rabbitTransport,
        outbox: {
          schema: db.schema,
          migrate: pool,
          relay: { database: pool, pollInterval: '50ms' },
        },
      }),
      [OrdersService, InvoiceConsumer],
      probe,
    );
    const orders = app.get(OrdersService);
    const ids = ['o1', 'o2', 'o3', 'o4', 'o5'];
    for (const id of ids) await orders.place(id);
    // The same order placed again: a second row with the same key, absorbed by the consumers.
    await orders.place('o1');
    await waitFor(
      async () => {
        const counted = await effects(db);
        return ids.every((id) => counted.has(`mail:${id}`));
      },
      'every order invoiced and mailed',
      20_000,
    );
    await sleep(300);
    await app.close();
    const counted = await effects(db);
    for (const id of ids) {
      expect([counted.get(`invoice:${id}`), counted.get(`mail:${id}`)]).toEqual([1, 1]);
    }
    expect(counted.get('order:o1')).toBe(2);
  }, 60_000);

  it("runs a consumer on an ORM's ledger as on any other: ctx.tx is the Knex transaction", async () => {
    const probe = new Probe();
    const knex = knexFactory({ client: 'pg', connection: postgres.url, pool: { min: 0, max: 4 } });
    const KNEX = 'test:knex';

    @Injectable()
    class KnexConsumer {
      @OncemqConsumer<PaymentSucceeded>({
        group: 'knex-points',
        topics: 'payment-succeeded',
        key: { jsonPath: 'eventId' },
      })
      async credit(event: PaymentSucceeded, ctx: HandlerContext<Knex.Transaction>): Promise<void> {
        await ctx.tx.withSchema(db.schema).insert({ key: event.eventId }).into('effects');
      }
    }

    @Module({
      imports: [
        OncemqModule.forRootAsync<Knex.Transaction>({
          extraProviders: [{ provide: KNEX, useValue: knex }],
          inject: [KNEX],
          useFactory: (given: Knex) => ({
            ledger: () => knexLedger(given, { schema: db.schema, table: 'knex_ledger' }),
            transport: rabbitTransport,
          }),
        }),
      ],
      providers: [KnexConsumer, { provide: PROBE, useValue: probe }],
    })
    class AppModule {}

    try {
      const app = await createContext(AppModule);
      apps.push(app);
      const transport = app.get<RabbitTransport>(ONCEMQ_TRANSPORT);
      const events = paymentEvents(6, 'knex');
      for (const event of [...events, ...events.slice(0, 3)]) {
        await transport.publish({ topic: 'payment-succeeded', key: event.eventId, body: event });
      }
      await waitFor(
        async () => {
          const counted = await effects(db);
          return events.every((event) => counted.has(event.eventId));
        },
        'every event applied',
        20_000,
      );
      await sleep(300);
      await app.close();
      const counted = await effects(db);
      expect(events.filter((event) => counted.get(event.eventId) !== 1)).toEqual([]);
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT COUNT(*)::int AS n FROM "${db.schema}".knex_ledger WHERE status = 'SUCCESS'`,
      );
      expect(rows[0]?.n).toBe(6);
      // The knex instance is the application's: still usable after the module closed its ledger.
      expect(await knex.raw('SELECT 1 AS one')).toMatchObject({ rows: [{ one: 1 }] });
    } finally {
      await knex.destroy();
    }
  }, 60_000);

  describe('refuses at bootstrap', () => {
    const scratchLedger = (): PostgresLedger => new PostgresLedger({ pool: db.pool, schema: db.schema });

    /** The bootstrap's error, or undefined when it started; `made`: the module creates its transport and ledger. */
    async function bootstrapError(
      providers: unknown[],
      names: string[] = [],
      made = false,
    ): Promise<unknown> {
      const probe = new Probe();
      const extra = names.map((name) =>
        OncemqModule.forRoot({ name, transport: rabbitTransport(), ledger: scratchLedger() }),
      );
      const main = made
        ? OncemqModule.forRoot({ transport: rabbitTransport, ledger: scratchLedger })
        : OncemqModule.forRoot({ transport: rabbitTransport(), ledger: scratchLedger() });
      @Module({
        imports: [main, ...extra],
        providers: [{ provide: DB, useValue: db }, { provide: PROBE, useValue: probe }, ...(providers as [])],
      })
      class AppModule {}
      return createContext(AppModule).then(
        (app) => {
          apps.push(app);
          return undefined;
        },
        (error: unknown) => error,
      );
    }

    it('two consumers of one group', async () => {
      @Injectable()
      class Twice {
        @OncemqConsumer({ group: 'points', topics: 'a' })
        first(): void {}

        @OncemqConsumer({ group: 'points', topics: 'b' })
        second(): void {}
      }
      const error = await bootstrapError([Twice], [], true);
      expect(error).toBeInstanceOf(ConfigError);
      expect(String(error)).toMatch(/Twice\.second.*group 'points' is already consumed by Twice\.first/);
      expect(transports.map((transport) => transport.declared.queues.size)).toEqual([0]);
      // Nest runs no shutdown hook after a failed bootstrap: the module closed the transport it made.
      await expect(transports[0]?.publish({ topic: 'a', body: {} })).rejects.toBeInstanceOf(ClosedError);
    });

    it('a subscription the transport refuses, after another consumer subscribed: that one is closed again', async () => {
      @Injectable()
      class SecondRefused {
        @OncemqConsumer({ group: 'alpha', topics: 'a' })
        first(): void {}

        @OncemqConsumer({ group: 'beta', topics: 'not a topic' })
        second(): void {}
      }
      const error = await bootstrapError([SecondRefused]);
      expect(String(error)).toMatch(/not a valid topic/);
      const [transport] = transports;
      if (transport === undefined) throw new Error('no transport');
      // The transport is the application's and stays open: only the module's own drain left the queue.
      expect(await queueState(rabbit.url, transport.names.work('alpha'))).toEqual({
        messages: 0,
        consumers: 0,
      });
      expect(await transport.publish({ topic: 'a', body: {} })).toMatchObject({ topic: 'a' });
    });

    it('a consumer on a request-scoped provider', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class PerRequest {
        @OncemqConsumer({ group: 'points', topics: 'a' })
        handle(): void {}
      }
      const error = await bootstrapError([PerRequest]);
      expect(error).toBeInstanceOf(ConfigError);
      expect(String(error)).toMatch(/PerRequest\.handle.*request-scoped/);
    });

    it('a consumer of a module name no OncemqModule has', async () => {
      @Injectable()
      class Billing {
        @OncemqConsumer({ group: 'points', topics: 'a', moduleName: 'billing' })
        handle(): void {}
      }
      expect(String(await bootstrapError([Billing]))).toMatch(/no OncemqModule is named 'billing'/);
      expect(await bootstrapError([Billing], ['billing'])).toBeUndefined();
    });

    it('a consumer setting the pipeline refuses', async () => {
      @Injectable()
      class BadGroup {
        @OncemqConsumer({ group: 'has space', topics: 'a' })
        handle(): void {}
      }
      const error = await bootstrapError([BadGroup]);
      expect(error).toBeInstanceOf(ConfigError);
      expect(String(error)).toMatch(/BadGroup\.handle.*group/);
    });
  });
});
