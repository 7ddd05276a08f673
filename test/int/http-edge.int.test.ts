// The HTTP edge's semantics on a real server (Express) over PostgreSQL, MariaDB and SQLite: one
// effect per key under 100 concurrent requests, 400/422/409/410/413 without running the handler,
// failures counted to a dead letter that `oncemq ledger failed` and the dashboard list, and
// replays byte for byte.
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Ledger } from 'oncemq';
import type { HttpEdge } from 'oncemq/http';
import { injectCommitFailures } from 'oncemq/testing';
import { type DashboardState, openDashboardSources, startDashboard } from '../support/internal.js';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import {
  createOrder,
  HTTP_DATABASES,
  post,
  startServer,
  testEdge,
  type HttpDb,
  type RouteBehaviour,
  type TestServer,
} from '../support/http.js';

/** Sends a request as raw bytes (a header value fetch would refuse) and reads the status line. */
function rawStatus(url: string, request: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)));
    socket.on('error', reject);
    socket.write(request, 'latin1');
  });
}

beforeAll(() => buildCli(), 120_000);
afterAll(() => removeCli());

describe.each(HTTP_DATABASES)('the HTTP edge on $name', (factory) => {
  let db: HttpDb | undefined;
  let ledger: Ledger;
  const servers: TestServer[] = [];
  const edges: HttpEdge<unknown>[] = [];

  beforeEach(async () => {
    db = await factory.open();
    if (db !== undefined) ledger = db.ledger();
  });

  afterEach(async () => {
    for (const server of servers.splice(0)) await server.close();
    for (const edge of edges.splice(0)) edge.close();
    await db?.close();
  });

  async function serve(
    behaviour: RouteBehaviour,
    extra: Parameters<typeof testEdge>[1] = {},
  ): Promise<{ url: string; edge: HttpEdge<unknown> }> {
    const edge = testEdge(ledger, extra);
    edges.push(edge);
    const server = await startServer('express', edge, behaviour);
    servers.push(server);
    return { url: `${server.url}/orders/shop-1`, edge };
  }

  it('answers a key from the handler once, then with the stored response byte for byte, marked as a replay', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const { url } = await serve(createOrder(db));
    const first = await post(url, { item: 'book' }, { 'idempotency-key': 'order-1' });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await post(url, { item: 'book' }, { 'idempotency-key': '"order-1"' });
    expect(again.status).toBe(201);
    expect(again.bytes.equals(first.bytes)).toBe(true);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(again.headers.get('location')).toBe('/orders/order-1');
    expect(await db.count('order-1')).toBe(1);
  });

  it('answers a completed key from the row it read, without a claim, and counts the replay as a duplicate', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const claim = ledger.transaction.bind(ledger);
    let claims = 0;
    ledger.transaction = (request, work) => {
      claims += 1;
      return claim(request, work);
    };
    const { url, edge } = await serve(createOrder(db));
    const first = await post(url, { item: 'pen' }, { 'idempotency-key': 'order-7' });
    expect(first.status).toBe(201);
    expect(claims).toBe(1);
    for (let i = 0; i < 3; i++) {
      const again = await post(url, { item: 'pen' }, { 'idempotency-key': 'order-7' });
      expect(again.bytes.equals(first.bytes)).toBe(true);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    }
    const reused = await post(url, { item: 'ink' }, { 'idempotency-key': 'order-7' });
    expect(reused.status).toBe(422);
    expect(claims).toBe(1);
    expect(edge.metrics().outcomes).toMatchObject({ executed: 1, duplicate: 3, conflict: 1 });
    expect(await db.count('order-7')).toBe(1);
  });

  it.for(['transactional', 'leased'] as const)(
    '%s: 100 concurrent requests with one key apply one effect; each other one is answered 409 or the stored response',
    async (mode, ctx) => {
      if (db === undefined) return ctx.skip();
      const { url } = await serve(createOrder(db), { mode, lease: '10s' });
      const answers = await Promise.all(
        Array.from({ length: 100 }, () => post(url, { item: 'lamp' }, { 'idempotency-key': 'burst-1' })),
      );
      expect(await db.count('burst-1')).toBe(1);
      const fresh = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') === null);
      expect(fresh).toHaveLength(1);
      const freshBytes = (fresh[0] as (typeof answers)[number]).bytes;
      for (const answer of answers) {
        if (answer === fresh[0]) continue;
        if (answer.status === 409) {
          expect(answer.json).toMatchObject({ code: 'in-flight' });
          expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        } else {
          expect(answer.status).toBe(201);
          expect(answer.headers.get('idempotent-replayed')).toBe('true');
          expect(answer.bytes.equals(freshBytes)).toBe(true);
        }
      }
      const replay = await post(url, { item: 'lamp' }, { 'idempotency-key': 'burst-1' });
      expect(replay.bytes.equals(freshBytes)).toBe(true);
    },
  );

  it('refuses a missing key (400) and a key reused for another body, method or path (422) without running the handler; keys of two principals never meet', async (ctx) => {
    if (db === undefined) return ctx.skip();
    let runs = 0;
    const orders = createOrder(db);
    const { url } = await serve((context) => {
      runs++;
      return orders(context);
    });
    const missing = await post(url, { item: 'pen' });
    expect(missing.status).toBe(400);
    expect(missing.headers.get('content-type')).toBe('application/problem+json');
    expect(missing.json).toMatchObject({ status: 400, code: 'missing-key' });
    expect((await post(url, { item: 'pen' }, { 'idempotency-key': 'k-1' })).status).toBe(201);
    const otherBody = await post(url, { item: 'ink' }, { 'idempotency-key': 'k-1' });
    expect(otherBody.status).toBe(422);
    expect(otherBody.json).toMatchObject({ code: 'key-reused' });
    const otherPath = await post(
      url.replace('shop-1', 'shop-2'),
      { item: 'pen' },
      { 'idempotency-key': 'k-1' },
    );
    expect(otherPath.status).toBe(422);
    const bob = await post(url, { item: 'ink' }, { 'idempotency-key': 'k-1', 'x-user': 'bob' });
    expect(bob.status).toBe(201);
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    expect(runs).toBe(2);
    expect(await db.count('k-1')).toBe(2);
  });

  it('with required: false, a request without a key runs under a fresh key of its own: each one applies its effect', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const { url } = await serve(createOrder(db), { required: false });
    const answers = [await post(url, { item: 'tea' }), await post(url, { item: 'tea' })];
    expect(answers.map((a) => [a.status, a.headers.get('idempotent-replayed')])).toEqual([
      [201, null],
      [201, null],
    ]);
    expect(await db.count()).toBe(2);
  });

  it('a failing handler is answered its 5xx a bounded number of times, then 410: a dead letter listed by `oncemq ledger failed` and the dashboard', async (ctx) => {
    if (db === undefined) return ctx.skip();
    let runs = 0;
    let healthy = false;
    const orders = createOrder(db);
    const { url } = await serve(
      async (context) => {
        runs++;
        if (healthy) return orders(context);
        await db?.insert(context.tx, context.idempotencyKey, 'half'); // rolled back with the claim
        return { status: 503, json: { error: 'payments are down' } };
      },
      { retry: { delays: ['20ms', '20ms'] } },
    );
    const answers = [];
    for (let i = 0; i < 5; i++)
      answers.push(await post(url, { item: 'cup' }, { 'idempotency-key': 'poison-1' }));
    expect(answers.map((a) => a.status)).toEqual([503, 503, 503, 410, 410]);
    expect(answers[0]?.json).toEqual({ error: 'payments are down' });
    expect(answers[0]?.headers.get('retry-after')).toBe('1');
    expect(answers[2]?.headers.get('retry-after')).toBeNull();
    expect(answers[3]?.json).toMatchObject({ code: 'key-dead' });
    expect(runs).toBe(3);
    expect(await db.count()).toBe(0);

    const store = [
      '--store',
      db.store.name,
      '--url',
      db.store.url,
      ...(db.store.schema === undefined ? [] : ['--schema', db.store.schema]),
    ];
    const failed = await oncemq(['ledger', 'failed', '--group', 'http', '--json', ...store]);
    expect(failed.code, failed.stderr).toBe(0);
    const rows = JSON.parse(failed.stdout) as { key: string; attempt: number; remark: string }[];
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ key: '/orders/\\:shop:alice:poison-1', attempt: 3 });
    expect(rows[0]?.remark).toContain('the handler answered 503 (attempt 3 of 3; the key is dead');

    const opened = await openDashboardSources({
      groups: [],
      store: { name: db.store.name, target: { url: db.store.url, schema: db.store.schema, migrate: false } },
    });
    const dashboard = await startDashboard(opened.sources);
    try {
      const response = await fetch(`http://127.0.0.1:${dashboard.port}/api/state`, {
        headers: { 'x-oncemq-token': dashboard.token },
      });
      const state = (await response.json()) as DashboardState;
      expect(state.failed).toMatchObject({ ok: true, value: [{ group: 'http', attempt: 3 }] });
    } finally {
      await dashboard.close();
      await opened.close();
    }

    const reset = await oncemq([
      'ledger',
      'reset',
      '/orders/\\:shop:alice:poison-1',
      '--group',
      'http',
      ...store,
    ]);
    expect(reset.code, reset.stderr).toBe(0);
    healthy = true;
    expect((await post(url, { item: 'cup' }, { 'idempotency-key': 'poison-1' })).status).toBe(201);
    expect(await db.count('poison-1')).toBe(1);
  });

  it('a handler that throws is answered 500 and its writes roll back; the next request with the key runs again', async (ctx) => {
    if (db === undefined) return ctx.skip();
    let runs = 0;
    const orders = createOrder(db);
    const { url } = await serve(async (context) => {
      runs++;
      const answer = await orders(context);
      if (runs === 1) throw new Error('lost the connection to the warehouse');
      return answer;
    });
    const failed = await post(url, { item: 'mug' }, { 'idempotency-key': 'retry-1' });
    expect(failed.status).toBe(500);
    expect(await db.count()).toBe(0);
    const row = await ledger.get('http', '/orders/\\:shop:alice:retry-1');
    expect(row).toMatchObject({ status: 'FAIL', attempt: 1 });
    const retried = await post(url, { item: 'mug' }, { 'idempotency-key': 'retry-1' });
    expect(retried.status).toBe(201);
    expect(retried.json).toMatchObject({ attempt: 2 });
    expect(await db.count('retry-1')).toBe(1);
  });

  it('a commit that fails after the handler answered is 503, never the handler’s 201: nothing applied, and the retry runs once', async (ctx) => {
    if (db === undefined) return ctx.skip();
    let failed = false;
    ledger = injectCommitFailures(ledger, {
      commitFailure: () => !failed && (failed = true), // the first commit only
    });
    const { url } = await serve(createOrder(db));
    const lost = await post(url, { item: 'vase' }, { 'idempotency-key': 'commit-1' });
    expect(lost.status).toBe(503);
    expect(lost.json).toMatchObject({ code: 'unavailable' });
    expect(Number(lost.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await db.count()).toBe(0);
    const retried = await post(url, { item: 'vase' }, { 'idempotency-key': 'commit-1' });
    expect(retried.status).toBe(201);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(await db.count('commit-1')).toBe(1);
  });

  it('limits: a body over maxBodyBytes is 413, a hostile key 400, a response too large to store 500 with nothing stored', async (ctx) => {
    if (db === undefined) return ctx.skip();
    const orders = createOrder(db);
    let big = false;
    const { url } = await serve(
      async (context) => {
        const answer = await orders(context);
        return big ? { ...answer, json: { pad: 'x'.repeat(4096) } } : answer;
      },
      { maxBodyBytes: 2048, maxResponseBytes: 2048 },
    );
    const huge = await post(url, { pad: 'y'.repeat(4000) }, { 'idempotency-key': 'huge-1' });
    expect(huge.status).toBe(413);
    expect(huge.json).toMatchObject({ code: 'body-too-large' });
    expect(await ledger.get('http', '/orders/\\:shop:alice:huge-1')).toBeUndefined();

    const long = await post(url, { item: 'a' }, { 'idempotency-key': 'k'.repeat(10_240) });
    expect(long.status).toBe(400);
    expect(long.json).toMatchObject({ code: 'invalid-key' });
    const latin = await post(url, { item: 'a' }, { 'idempotency-key': 'cl\u00e9' });
    expect(latin.status).toBe(400);
    const twice = await rawStatus(
      url,
      `POST /orders/shop-1 HTTP/1.1\r\nHost: x\r\nx-user: alice\r\nidempotency-key: a\r\nidempotency-key: b\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`,
    );
    expect(twice).toBe(400);
    const control = await rawStatus(
      url,
      `POST /orders/shop-1 HTTP/1.1\r\nHost: x\r\nx-user: alice\r\nidempotency-key: a\x01b\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`,
    );
    expect(control).toBe(400);
    expect(await db.count()).toBe(0);

    big = true;
    const tooLarge = await post(url, { item: 'poster' }, { 'idempotency-key': 'large-1' });
    expect(tooLarge.status).toBe(500);
    expect(tooLarge.json).toMatchObject({ code: 'response-too-large' });
    expect(await db.count()).toBe(0);
    expect(await ledger.get('http', '/orders/\\:shop:alice:large-1')).toMatchObject({
      status: 'FAIL',
      result: null,
    });
  });

  it('leased mode: a request while the first one with its key runs is answered 409 with Retry-After, or waits for its answer', async (ctx) => {
    if (db === undefined) return ctx.skip();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const orders = createOrder(db);
    const { url } = await serve(
      async (context) => {
        await gate;
        return orders(context);
      },
      { mode: 'leased', lease: '3s' },
    );
    const first = post(url, { item: 'desk' }, { 'idempotency-key': 'slow-1' });
    let busy = await post(url, { item: 'desk' }, { 'idempotency-key': 'slow-1' });
    for (let i = 0; busy.status !== 409 && i < 50; i++)
      busy = await post(url, { item: 'desk' }, { 'idempotency-key': 'slow-1' });
    expect(busy.status).toBe(409);
    expect(busy.json).toMatchObject({ code: 'in-flight' });
    expect(Number(busy.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    const waiting = testEdge(ledger, { mode: 'leased', lease: '3s', inFlight: { wait: '10s' } });
    edges.push(waiting);
    const patient = await startServer('express', waiting, orders);
    servers.push(patient);
    const waited = post(`${patient.url}/orders/shop-1`, { item: 'desk' }, { 'idempotency-key': 'slow-1' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    release();
    const answered = await first;
    expect(answered.status).toBe(201);
    const replayed = await waited;
    expect(replayed.status).toBe(201);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.bytes.equals(answered.bytes)).toBe(true);
    expect(await db.count('slow-1')).toBe(1);
  });
});
