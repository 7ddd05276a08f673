// Every adapter of the HTTP edge on a real server of its framework (Express, Fastify, node:http,
// Hono through fetchIdempotency) over SQLite: the handler once per key, its status, chosen headers and
// bytes replayed, the raw body fingerprinted while the handler keeps its parsed one, failures rolled
// back and counted. And the edge over an ORM's ledger (Knex on PostgreSQL).
import { randomUUID } from 'node:crypto';
import knexFactory, { type Knex } from 'knex';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SILENT_LOGGER, type Ledger } from 'oncemq';
import { createHttpEdge, type HttpEdge } from 'oncemq/http';
import { knexLedger } from 'oncemq/knex';
import {
  createOrder,
  HTTP_DATABASES,
  post,
  startServer,
  testEdge,
  type AdapterName,
  type HttpDb,
  type RouteBehaviour,
  type TestServer,
} from '../support/http.js';
import { findPostgres, scratchSchema } from '../support/postgres.js';

const sqlite = HTTP_DATABASES.find((factory) => factory.name === 'sqlite');
const ADAPTERS: readonly AdapterName[] = ['express', 'fastify', 'node', 'hono'];

/** Bytes that are not UTF-8, so a replay must carry them as they are. */
const BINARY = new Uint8Array([0, 255, 1, 0xc3, 0x28, 10, 13, 0x7f, 0xfe]);

describe.each(ADAPTERS)('the HTTP edge through %s', (adapter) => {
  let db: HttpDb;
  let ledger: Ledger;
  const servers: TestServer[] = [];
  const edges: HttpEdge<unknown>[] = [];

  beforeEach(async () => {
    db = (await sqlite?.open()) as HttpDb;
    ledger = db.ledger();
  });

  afterEach(async () => {
    for (const server of servers.splice(0)) await server.close();
    for (const edge of edges.splice(0)) edge.close();
    await db.close();
  });

  async function serve(
    behaviour: RouteBehaviour,
    extra: Parameters<typeof testEdge>[1] = {},
  ): Promise<string> {
    const edge = testEdge(ledger, extra);
    edges.push(edge);
    const server = await startServer(adapter, edge, behaviour);
    servers.push(server);
    return `${server.url}/orders/shop-1`;
  }

  it('runs the handler once per key and replays its status, stored headers and bytes; other headers are not replayed', async () => {
    let runs = 0;
    const url = await serve(async (ctx) => {
      runs++;
      await db.insert(ctx.tx, ctx.idempotencyKey, 'binary');
      return {
        status: 202,
        bytes: BINARY,
        headers: {
          'content-type': 'application/octet-stream',
          'x-request-trace': randomUUID(),
          'set-cookie': ['session=one', 'theme=dark'],
        },
      };
    });
    const first = await post(url, { n: 1 }, { 'idempotency-key': 'bin-1' });
    expect(first.status).toBe(202);
    expect(new Uint8Array(first.bytes)).toEqual(BINARY);
    expect(first.headers.getSetCookie()).toEqual(['session=one', 'theme=dark']);
    const replay = await post(url, { n: 1 }, { 'idempotency-key': 'bin-1' });
    expect(replay.status).toBe(202);
    expect(replay.bytes.equals(first.bytes)).toBe(true);
    expect(replay.headers.get('content-type')).toBe('application/octet-stream');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('x-request-trace')).toBeNull();
    expect(replay.headers.getSetCookie()).toEqual([]);
    expect(runs).toBe(1);
    expect(await db.count('bin-1')).toBe(1);
  });

  it('fingerprints the raw bytes while the handler keeps what its framework parsed', async () => {
    const parsed: unknown[] = [];
    const orders = createOrder(db);
    const url = await serve((ctx) => {
      parsed.push((ctx.request.native as { body?: unknown }).body);
      return orders(ctx);
    });
    expect((await post(url, '{"item":"pen"}', { 'idempotency-key': 'raw-1' })).status).toBe(201);
    if (adapter === 'express' || adapter === 'fastify') expect(parsed).toEqual([{ item: 'pen' }]);
    // The same JSON in other bytes is another request.
    const spaced = await post(url, '{ "item": "pen" }', { 'idempotency-key': 'raw-1' });
    expect(spaced.status).toBe(422);
    expect(parsed).toHaveLength(1);
  });

  it('answers 400 without a key, 413 past maxBodyBytes and 500 for a response too large to store, storing nothing', async () => {
    const orders = createOrder(db);
    const url = await serve(async (ctx) => ({ ...(await orders(ctx)), json: { pad: 'z'.repeat(3000) } }), {
      maxBodyBytes: 1000,
      maxResponseBytes: 2000,
    });
    expect((await post(url, { item: 'a' })).json).toMatchObject({ status: 400, code: 'missing-key' });
    const huge = await post(url, { pad: 'y'.repeat(1500) }, { 'idempotency-key': 'big-body' });
    expect(huge.status).toBe(413);
    const tooLarge = await post(url, { item: 'a' }, { 'idempotency-key': 'big-answer' });
    expect(tooLarge.status).toBe(500);
    expect(tooLarge.json).toMatchObject({ code: 'response-too-large' });
    expect(await db.count()).toBe(0);
    expect(await ledger.get('http', '/orders/\\:shop:alice:big-body')).toBeUndefined();
  });

  it('a handler that throws is a failed attempt: 500, its writes rolled back; the next request runs it again', async () => {
    let runs = 0;
    const orders = createOrder(db);
    const url = await serve(async (ctx) => {
      const answer = await orders(ctx);
      if (++runs === 1) throw new Error('the warehouse did not answer');
      return answer;
    });
    expect((await post(url, { item: 'b' }, { 'idempotency-key': 'throw-1' })).status).toBe(500);
    expect(await db.count()).toBe(0);
    const again = await post(url, { item: 'b' }, { 'idempotency-key': 'throw-1' });
    expect(again.status).toBe(201);
    expect(again.json).toMatchObject({ attempt: 2 });
    expect(await db.count('throw-1')).toBe(1);
  });
});

const postgres = await findPostgres();

describe.skipIf(!postgres.available)('the HTTP edge over an ORM ledger (Knex on PostgreSQL)', () => {
  let knex: Knex;
  let schema: string;
  let server: TestServer | undefined;
  let edge: HttpEdge<Knex.Transaction> | undefined;

  beforeEach(async () => {
    schema = scratchSchema('oncemq_http_knex');
    knex = knexFactory({
      client: 'pg',
      connection: postgres.url,
      pool: { min: 0, max: 8 },
      searchPath: [schema],
    });
    await knex.raw(`CREATE SCHEMA "${schema}"`);
    await knex.schema.withSchema(schema).createTable('orders', (t) => {
      t.increments('id');
      t.string('idem').notNullable();
    });
  });

  afterEach(async () => {
    await server?.close();
    edge?.close();
    await knex.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await knex.destroy();
  });

  it('commits the handler’s Knex writes with the claim: 30 concurrent requests with one key, one order', async () => {
    edge = createHttpEdge<Knex.Transaction>({
      ledger: knexLedger(knex, { schema }),
      principal: (request) => request.headers['x-user'],
      logger: SILENT_LOGGER,
      telemetry: false,
    });
    server = await startServer('express', edge as HttpEdge<unknown>, async (ctx) => {
      const tx = ctx.tx as Knex.Transaction;
      await tx.withSchema(schema).table('orders').insert({ idem: ctx.idempotencyKey });
      return { status: 201, json: { orderId: randomUUID() } };
    });
    const url = `${server.url}/orders/shop-1`;
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => post(url, { item: 'chair' }, { 'idempotency-key': 'knex-1' })),
    );
    const fresh = answers.filter((a) => a.headers.get('idempotent-replayed') === null);
    expect(fresh.map((a) => a.status)).toEqual([201]);
    for (const answer of answers)
      expect(answer.status === 409 || answer.bytes.equals(fresh[0]?.bytes ?? Buffer.alloc(0))).toBe(true);
    const rows = await knex.withSchema(schema).table('orders').count<{ n: string }[]>({ n: '*' });
    expect(Number(rows[0]?.n)).toBe(1);
  });
});
