/**
 * The work every row of the transport and ordered suites does per message, on PostgreSQL: a payment
 * credits 100 points to one of `USERS` users. The raw rows claim the event id by hand in a table shaped
 * like the ledger (`INSERT … ON CONFLICT DO NOTHING`) and credit the points in the same transaction;
 * the oncemq rows do it through a pipeline on the PostgreSQL ledger.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { resolveServiceUrl } from '../src/cli/connection.js';
import { createPipeline, type Pipeline } from '../src/consumer/pipeline.js';
import type { Outcome } from '../src/core/outcome.js';
import type { PgClientLike } from '../src/ledger/postgres/postgres-client.js';
import { PostgresLedger } from '../src/ledger/postgres/postgres-ledger.js';
import { transactionRunner, USERS } from './sql.js';

/** The body of every message. */
export interface Payment {
  readonly eventId: string;
  readonly orderId: string;
  readonly userId: string;
  readonly amount: number;
  /** Position of the message in its drain (publish order). */
  readonly n: number;
}

/** The body of message `n` of a drain tagged `tag`; `orders` spreads the messages over that many orders. */
export function payment(tag: string, n: number, orders = USERS): Payment {
  return {
    eventId: `${tag}-${n}`,
    orderId: `order-${n % orders}`,
    userId: `user-${n % USERS}`,
    amount: 100,
    n,
  };
}

/** A message as a raw client receives it. */
export interface RawMessage {
  readonly body: Uint8Array | string;
  /** The broker's id of the stored copy (as the ledger-like table keeps it). */
  readonly brokerId: string;
}

const decoder = new TextDecoder();

/** Decodes a body, as any consumer must. */
export function decodePayment(body: Uint8Array | string): Payment {
  return JSON.parse(typeof body === 'string' ? body : decoder.decode(body)) as Payment;
}

export const GROUP = 'points';
export const TOPIC = 'payments';

/** A scratch schema with the points table, the ledger and the raw rows' ledger-like table. */
export class PointsDatabase {
  readonly pool: pg.Pool;
  readonly schema = `oncemq_bench_${randomBytes(4).toString('hex')}`;
  readonly ledger: PostgresLedger;
  readonly #inTransaction: ReturnType<typeof transactionRunner<pg.PoolClient>>;
  readonly #update: string;
  readonly #creditMany: string;
  readonly #rawInsert: string;
  readonly #rawBatchInsert: string;

  /** `connections`: the pool's size, the same for every row. */
  constructor(connections: number) {
    const { url } = resolveServiceUrl('postgres');
    this.pool = new pg.Pool({ connectionString: url, max: connections });
    this.ledger = new PostgresLedger({ pool: this.pool, schema: this.schema });
    this.#inTransaction = transactionRunner(() => this.pool.connect());
    const s = `"${this.schema}"`;
    const columns =
      'consumer_group, msg_key, status, fingerprint, owner, attempt, broker_id, topic, created_at, updated_at';
    this.#update = `UPDATE ${s}.points SET balance = balance + 100 WHERE user_id = $1`;
    // One statement credits a whole batch; users sorted, so concurrent batches lock rows in one order.
    this.#creditMany = `UPDATE ${s}.points AS p SET balance = p.balance + 100 * c.n
      FROM unnest($1::text[], $2::int[]) AS c(u, n) WHERE p.user_id = c.u`;
    this.#rawInsert = `INSERT INTO ${s}.raw_ledger (${columns})
      VALUES ($1, $2, 'SUCCESS', NULL, NULL, 1, $3, $4, $5, $5) ON CONFLICT (consumer_group, msg_key) DO NOTHING`;
    this.#rawBatchInsert = `INSERT INTO ${s}.raw_ledger (${columns})
      SELECT $1, k, 'SUCCESS', NULL, NULL, 1, b, $4, $5, $5 FROM unnest($2::text[], $3::text[]) AS t(k, b)
      ON CONFLICT (consumer_group, msg_key) DO NOTHING RETURNING msg_key`;
  }

  async init(): Promise<void> {
    const s = `"${this.schema}"`;
    await this.pool.query(`CREATE SCHEMA ${s}`);
    await this.pool.query(`CREATE TABLE ${s}.points (user_id text PRIMARY KEY, balance bigint NOT NULL)`);
    await this.pool.query(
      `INSERT INTO ${s}.points SELECT 'user-' || g, 0 FROM generate_series(0, ${USERS - 1}) AS g`,
    );
    await this.ledger.init();
    // The raw rows write the same row shape into an identical table (same columns and indexes).
    await new PostgresLedger({ pool: this.pool, schema: this.schema, table: 'raw_ledger' }).init();
  }

  /** Points credited so far ÷ 100: one per applied message. */
  async effects(): Promise<number> {
    const { rows } = await this.pool.query<{ total: string }>(
      `SELECT coalesce(sum(balance), 0)::text AS total FROM "${this.schema}".points`,
    );
    return Number(rows[0]?.total ?? 0) / 100;
  }

  /** By hand: claims the event id and credits the points in one transaction. */
  rawOne(message: RawMessage): Promise<void> {
    const event = decodePayment(message.body);
    return this.#inTransaction(async (client) => {
      const { rowCount } = await client.query(this.#rawInsert, [
        GROUP,
        event.eventId,
        message.brokerId,
        TOPIC,
        new Date(),
      ]);
      if (rowCount === 1) await client.query(this.#update, [event.userId]);
    });
  }

  /** By hand: claims a batch's event ids with one statement and credits them with another, in one transaction. */
  rawBatch(messages: readonly RawMessage[]): Promise<void> {
    const events = messages.map((message) => decodePayment(message.body));
    const users = new Map(events.map((event) => [event.eventId, event.userId]));
    return this.#inTransaction(async (client) => {
      const { rows } = await client.query<{ msg_key: string }>(this.#rawBatchInsert, [
        GROUP,
        events.map((event) => event.eventId),
        messages.map((message) => message.brokerId),
        TOPIC,
        new Date(),
      ]);
      const won = rows.map((row) => users.get(row.msg_key) ?? '');
      if (won.length > 0) await this.#credit(client, won);
    });
  }

  /** Credits one message's points per user named, with one statement. */
  #credit(tx: PgClientLike, userIds: readonly string[]): Promise<unknown> {
    const counts = new Map<string, number>();
    for (const user of userIds) counts.set(user, (counts.get(user) ?? 0) + 1);
    const sorted = [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return tx.query(this.#creditMany, [sorted.map(([u]) => u), sorted.map(([, n]) => n)]);
  }

  /** The pipeline of the single rows: the handler credits one payment. */
  pipeline(
    onOutcome: (outcome: Outcome) => void,
    onEvent?: (event: Payment) => void,
    group = GROUP,
  ): Pipeline {
    return createPipeline<PgClientLike, Payment>({
      ledger: this.ledger,
      group,
      handler: async (event, ctx) => {
        onEvent?.(event);
        await ctx.tx.query(this.#update, [event.userId]);
      },
      onOutcome,
    });
  }

  /** The pipeline of the batch rows: the batch handler credits the won events with one statement. */
  batchPipeline(onOutcome: (outcome: Outcome) => void): Pipeline {
    return createPipeline<PgClientLike, Payment>({
      ledger: this.ledger,
      group: GROUP,
      batchHandler: async (events, ctx) => {
        await this.#credit(
          ctx.tx,
          events.map(({ message }) => message.userId),
        );
      },
      onOutcome,
    });
  }

  async close(): Promise<void> {
    await this.ledger.close().catch(() => undefined);
    await this.pool.query(`DROP SCHEMA IF EXISTS "${this.schema}" CASCADE`).catch(() => undefined);
    await this.pool.end();
  }
}
