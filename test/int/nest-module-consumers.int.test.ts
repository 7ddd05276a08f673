// OncemqModule in a real Nest application: consumers declared with @OncemqConsumer on providers,
// RabbitMQ as the transport, a PostgreSQL ledger; bootstrap subscribes, app.close() drains.
import { Inject, Injectable, Module } from '@nestjs/common';
import knexFactory, { type Knex } from 'knex';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ClosedError, type HandlerContext, type Outbox } from 'oncemq';
import {
  InjectOutbox,
  OncemqConsumer,
  OncemqModule,
  ONCEMQ_LEDGER,
  ONCEMQ_OUTBOX,
  ONCEMQ_TRANSPORT,
} from 'oncemq/nest';
import { knexLedger } from 'oncemq/knex';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import type { RabbitTransport } from 'oncemq/rabbitmq';
import { sleep, waitFor } from '../support/internal.js';
import {
  createContext,
  effects,
  nestApplicationScope,
  PointsConsumer,
  POOL,
  postgres,
  Probe,
  PROBE,
  queueState,
  rabbit,
} from '../support/nest-application.js';
import { paymentEvents, type PaymentSucceeded } from '../support/points.js';
import type { PointsSchema } from '../support/postgres.js';

describe.skipIf(!rabbit.available || !postgres.available)('OncemqModule in a Nest application', () => {
  let db: PointsSchema;
  const { apps, rabbitTransport, start } = nestApplicationScope((opened) => (db = opened));

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
});
