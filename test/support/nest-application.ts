// What the tests of OncemqModule in a real Nest application share: RabbitMQ as the transport, a
// PostgreSQL points schema, a probe inside the application and the payment-to-points consumer.
// Decorators compile with `experimentalDecorators` (tsconfig.json); vitest's esbuild emits no
// design-type metadata, so every constructor parameter names its token with @Inject.
import { Inject, Injectable, Module, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import amqplib from 'amqplib';
import type pg from 'pg';
import { afterEach, beforeEach } from 'vitest';
import type { HandlerContext, Outcome } from 'oncemq';
import { OncemqConsumer, OncemqModule, type OncemqModuleConfig } from 'oncemq/nest';
import type { PgClientLike } from 'oncemq/postgres';
import { RabbitTransport } from 'oncemq/rabbitmq';
import type { PaymentSucceeded } from './points.js';
import { findPostgres, pointsSchema, type PointsSchema } from './postgres.js';
import { deleteTopology, findRabbit, scratchPrefix } from './rabbitmq.js';

export const rabbit = await findRabbit();
export const postgres = await findPostgres();

export const POOL = 'test:pool';
export const DB = 'test:db';
export const PROBE = 'test:probe';

/** Probes made by the running test; a failed test's held handler is released before its app closes. */
const probes = new Set<Probe>();

/** What a test watches from inside the application: outcomes, and a handler it can hold. */
export class Probe {
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
export class PointsConsumer {
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
export function createContext(module: Type): Promise<INestApplicationContext> {
  // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- Nest's options are a plain object
  return NestFactory.createApplicationContext(module, { logger: false, abortOnError: false });
}

export async function effects(db: PointsSchema): Promise<Map<string, number>> {
  const { rows } = await db.pool.query<{ key: string; n: number }>(
    `SELECT key, COUNT(*)::int AS n FROM "${db.schema}".effects GROUP BY key`,
  );
  return new Map(rows.map((row) => [row.key, row.n]));
}

/** Messages ready in a queue and consumers on it, read on a connection of the test's own. */
export async function queueState(
  url: string,
  queue: string,
): Promise<{ messages: number; consumers: number }> {
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

/** What the tests of one describe share: this test's points schema, and what they opened, closed after it. */
export interface NestApplicationScope {
  readonly transports: RabbitTransport[];
  readonly apps: INestApplicationContext[];
  /** A RabbitMQ transport in this test's namespace, closed and deleted after the test. */
  readonly rabbitTransport: () => RabbitTransport;
  /** An application whose database module provides the pool, and the oncemq module built from it. */
  readonly start: (
    config: (pool: pg.Pool) => OncemqModuleConfig<PgClientLike>,
    providers: unknown[],
    probe: Probe,
  ) => Promise<INestApplicationContext>;
}

/**
 * Opens a points schema, handed to `opened`, and a RabbitMQ namespace before each test of the calling
 * describe, and closes all after it.
 */
export function nestApplicationScope(opened: (db: PointsSchema) => void): NestApplicationScope {
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
    opened(db);
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

  return {
    transports,
    apps,
    rabbitTransport,
    start,
  };
}
