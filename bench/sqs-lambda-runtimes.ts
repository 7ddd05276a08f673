/**
 * The Lambda functions the `sqs` bench and the Lambda tests run under the local event source, each an
 * execution environment of its own (its PostgreSQL pool, its Redis client) that a timeout throws away:
 * - oncemq's `sqsHandler` over a pipeline on the PostgreSQL ledger (transactional: the claim and the
 *   business write commit together);
 * - Powertools' `BatchProcessor` with `makeIdempotent` on its Redis (cache) persistence layer, the
 *   business write committed on its own before Powertools records the key as completed.
 * Both make the same business write, one row per applied message in `effects`, which is what the
 * effect checker counts.
 */
import { randomBytes } from 'node:crypto';
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import pg from 'pg';
import { createClient } from 'redis';
import { createPipeline, type Pipeline } from '../src/consumer/pipeline.js';
import type { Outcome } from '../src/core/outcome.js';
import type { RetryPolicyConfig } from '../src/core/retry-policy.js';
import type { PgClientLike } from '../src/ledger/postgres/postgres-client.js';
import { PostgresLedger } from '../src/ledger/postgres/postgres-ledger.js';
import {
  sqsHandler,
  type SqsHandlerOptions,
  type SqsLambdaHandler,
} from '../src/transport/sqs/sqs-lambda-handler.js';
import type { LambdaRuntime } from './lambda-event-source.js';

/** The body of every message: an event id (the business key) and whose points it credits. */
export interface PaymentEvent {
  readonly eventId: string;
  readonly userId: string;
}

/**
 * Called after the business write, before the effect is recorded as complete (oncemq: before the
 * transaction commits; Powertools: before its completion record). A fault injector returns a promise
 * that never settles: the invocation then times out there and its environment is killed.
 */
export type AfterWrite = (event: PaymentEvent) => Promise<void> | void;

/** A scratch schema holding the effects (and the ledgers), and the admin pool that kills environments. */
export class EffectsDatabase {
  readonly schema = `oncemq_sqs_${randomBytes(4).toString('hex')}`;
  readonly admin: pg.Pool;

  constructor(readonly url: string) {
    this.admin = new pg.Pool({ connectionString: url, max: 2 });
  }

  async init(): Promise<void> {
    await this.admin.query(`CREATE SCHEMA "${this.schema}"`);
    await this.admin.query(
      `CREATE TABLE "${this.schema}".effects (event_id text NOT NULL, user_id text NOT NULL)`,
    );
    // The raw row's claim table, shaped like the ledger's.
    await new PostgresLedger({ pool: this.admin, schema: this.schema, table: 'raw_ledger' }).init();
  }

  /** The business write: one row per applied message. */
  get insert(): string {
    return `INSERT INTO "${this.schema}".effects (event_id, user_id) VALUES ($1, $2)`;
  }

  /** Effects applied so far. */
  async total(): Promise<number> {
    const { rows } = await this.admin.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM "${this.schema}".effects`,
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** How many times each event's effect was applied, for the events whose id starts with `prefix`. */
  async counts(prefix: string): Promise<Map<string, number>> {
    const { rows } = await this.admin.query<{ event_id: string; n: number }>(
      `SELECT event_id, count(*)::int AS n FROM "${this.schema}".effects WHERE starts_with(event_id, $1) GROUP BY event_id`,
      [prefix],
    );
    return new Map(rows.map((row) => [row.event_id, row.n]));
  }

  /** A pool of one execution environment, named so that {@link kill} can end its connections. */
  pool(name: string, max: number): pg.Pool {
    const pool = new pg.Pool({ connectionString: this.url, max, application_name: name });
    pool.on('error', () => undefined); // a killed environment's idle clients
    return pool;
  }

  /** Ends an environment's connections at once, as its process dying would: open transactions roll back. */
  async kill(pool: pg.Pool, name: string): Promise<void> {
    await this.admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1',
      [name],
    );
    void pool.end().catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.admin.query(`DROP SCHEMA IF EXISTS "${this.schema}" CASCADE`).catch(() => undefined);
    await this.admin.end();
  }
}

export interface OncemqRuntimeConfig {
  readonly db: EffectsDatabase;
  readonly group?: string;
  /** The pipeline's lease. @default '5s' */
  readonly lease?: string;
  readonly mode?: 'transactional' | 'leased';
  /** The handler's extra work per message, in milliseconds (the timeout tests). @default 0 */
  readonly workMs?: number;
  readonly afterWrite?: AfterWrite;
  readonly handler?: SqsHandlerOptions;
  readonly onOutcome?: (outcome: Outcome) => void;
  /** Connections of the environment's pool. @default 2 */
  readonly connections?: number;
  /** The pipeline's retry policy. @default the pipeline's */
  readonly retry?: RetryPolicyConfig;
  /** What the runtime invokes around `sqsHandler` (a Middy chain). @default the handler itself */
  readonly wrap?: (handler: SqsLambdaHandler) => LambdaRuntime['handler'];
}

let environments = 0;

/** oncemq's `sqsHandler`, one new environment per call. */
export function oncemqRuntime(config: OncemqRuntimeConfig): () => Promise<LambdaRuntime> {
  const { db } = config;
  return () => {
    const name = `oncemq-lambda-${process.pid}-${environments++}`;
    const pool = db.pool(name, config.connections ?? 2);
    const ledger = new PostgresLedger({ pool, schema: db.schema });
    const pipeline: Pipeline = createPipeline<PgClientLike, PaymentEvent>({
      ledger,
      group: config.group ?? 'points',
      key: { jsonPath: 'eventId' },
      lease: config.lease ?? '5s',
      ...(config.mode === undefined ? {} : { mode: config.mode }),
      ...(config.retry === undefined ? {} : { retry: config.retry }),
      handler: async (event, ctx) => {
        if ((config.workMs ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, config.workMs));
        await ctx.tx.query(db.insert, [event.eventId, event.userId]);
        await config.afterWrite?.(event);
      },
      ...(config.onOutcome === undefined ? {} : { onOutcome: config.onOutcome }),
      telemetry: false,
    });
    const handler = (config.wrap ?? ((plain) => plain))(sqsHandler(pipeline, config.handler));
    return Promise.resolve({
      handler,
      kill: async () => {
        pipeline.close();
        await db.kill(pool, name);
      },
      close: async () => {
        pipeline.close();
        await pool.end();
      },
    });
  };
}

export interface PowertoolsRuntimeConfig {
  readonly db: EffectsDatabase;
  readonly redisUrl: string;
  /** Prefix of the idempotency keys in Redis, unique to a run. */
  readonly keyPrefix: string;
  readonly afterWrite?: AfterWrite;
  /** Connections of the environment's pool. @default 2 */
  readonly connections?: number;
}

/** Powertools' batch processor and idempotency (Redis persistence), one new environment per call. */
export function powertoolsRuntime(config: PowertoolsRuntimeConfig): () => Promise<LambdaRuntime> {
  const { db } = config;
  return async () => {
    const name = `powertools-lambda-${process.pid}-${environments++}`;
    const pool = db.pool(name, config.connections ?? 2);
    const client = createClient({ url: config.redisUrl });
    client.on('error', () => undefined);
    await client.connect();
    const persistenceStore = new CachePersistenceLayer({ client });
    // The record's business key, as oncemq reads it: the body's eventId.
    const idempotency = new IdempotencyConfig({ eventKeyJmesPath: 'powertools_json(body).eventId' });
    const processor = new BatchProcessor(EventType.SQS);
    const record = makeIdempotent(
      async (message: { body: string }) => {
        const event = JSON.parse(message.body) as PaymentEvent;
        await pool.query(db.insert, [event.eventId, event.userId]);
        await config.afterWrite?.(event);
        return true;
      },
      { persistenceStore, config: idempotency, keyPrefix: config.keyPrefix },
    );
    return {
      // Powertools types these with @types/aws-lambda; the shapes are Lambda's own.
      handler: (event, context) => {
        idempotency.registerLambdaContext(context);
        return processPartialResponse(event as never, record, processor, { context: context as never });
      },
      kill: async () => {
        client.destroy();
        await db.kill(pool, name);
      },
      close: async () => {
        client.destroy();
        await pool.end();
      },
    };
  };
}
