// The dashboard's HTTP API over real stores: the token on every request, a missing ledger table shown
// as an error (and never created), stuck and failed claims reset only while they are still the row
// shown, dead letters of the local broker replayed to the group's consumer, and counters read from a
// consumer's Prometheus endpoint.
import { existsSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, type Ledger, type Outcome, PermanentError } from 'oncemq';
import type { LocalBroker } from 'oncemq/local';
import { PostgresLedger } from 'oncemq/postgres';
import { servePrometheus } from 'oncemq/prometheus';
import { SqliteLedger } from 'oncemq/sqlite';
import {
  type Dashboard,
  type DashboardState,
  type DashboardTargets,
  openDashboardSources,
  type ResetAnswer,
  startDashboard,
} from '../support/internal.js';
import { testBroker, waitUntil } from '../support/local-points.js';
import { pointsRequest, scratchDir } from '../support/points.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';

interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

/** One HTTP request with any headers (Host included, which fetch does not let a caller set). */
function request(
  dashboard: Dashboard,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<Answer> {
  const body = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: dashboard.port,
        path,
        method: options.method ?? 'GET',
        headers: {
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const withToken = (dashboard: Dashboard): Record<string, string> => ({ 'x-oncemq-token': dashboard.token });

async function state(dashboard: Dashboard): Promise<DashboardState> {
  const answer = await request(dashboard, '/api/state', { headers: withToken(dashboard) });
  expect(answer.status).toBe(200);
  return JSON.parse(answer.body) as DashboardState;
}

function act(dashboard: Dashboard, path: string, body: unknown): Promise<Answer> {
  return request(dashboard, path, { method: 'POST', headers: withToken(dashboard), body });
}

/** A dashboard over `targets` as `oncemq dashboard` opens them; closed after the test. */
function dashboards(): (targets: DashboardTargets) => Promise<Dashboard> {
  const open: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of open.splice(0).reverse()) await close();
  });
  return async (targets) => {
    const opened = await openDashboardSources(targets);
    open.push(() => opened.close());
    const dashboard = await startDashboard(opened.sources);
    open.push(() => dashboard.close());
    return dashboard;
  };
}

describe('dashboard access', () => {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'ledger.db');
  let dashboard: Dashboard;

  beforeAll(async () => {
    const ledger = new SqliteLedger({ database: path });
    await ledger.init();
    await ledger.close();
    const opened = await openDashboardSources({
      groups: [],
      store: { name: 'sqlite', target: { url: path, migrate: false } },
    });
    dashboard = await startDashboard(opened.sources);
  });

  afterAll(async () => {
    await dashboard.close();
    scratch.remove();
  });

  it('refuses every request without the token with 401, the page and its script included', async () => {
    for (const path of ['/', '/dashboard.js', '/dashboard.css', '/api/state']) {
      const answer = await request(dashboard, path);
      expect(answer.status, path).toBe(401);
      expect(answer.body).not.toContain(dashboard.token);
    }
    const wrong = dashboard.token.replace(/^./, (c) => (c === 'a' ? 'b' : 'a'));
    expect((await request(dashboard, `/api/state?token=${wrong}`)).status).toBe(401);
    expect((await request(dashboard, '/api/state', { headers: { 'x-oncemq-token': wrong } })).status).toBe(
      401,
    );
    expect((await request(dashboard, '/api/state', { headers: { 'x-oncemq-token': 'short' } })).status).toBe(
      401,
    );
    expect(
      (await act({ ...dashboard, token: wrong }, '/api/claims/reset', { group: 'g', key: 'k', attempt: 1 }))
        .status,
    ).toBe(401);
  });

  it('takes the token from the printed URL, sets it as a strict HttpOnly cookie, and reads with the cookie', async () => {
    const page = await request(dashboard, `/?token=${dashboard.token}`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    const cookie = String(page.headers['set-cookie']);
    expect(cookie).toContain(`oncemq_dashboard=${dashboard.token}`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    const sent = { cookie: `oncemq_dashboard=${dashboard.token}` };
    expect((await request(dashboard, '/dashboard.js', { headers: sent })).status).toBe(200);
    expect((await request(dashboard, '/api/state', { headers: sent })).status).toBe(200);
    expect(
      (await request(dashboard, '/api/state', { headers: { authorization: `Bearer ${dashboard.token}` } }))
        .status,
    ).toBe(200);
  });

  it('takes an action only with the token in a header: a cookie or the query is refused (no cross-site POST)', async () => {
    const body = { group: 'g', key: 'k', attempt: 1 };
    const cookie = { cookie: `oncemq_dashboard=${dashboard.token}` };
    expect(
      (await request(dashboard, '/api/claims/reset', { method: 'POST', headers: cookie, body })).status,
    ).toBe(401);
    expect(
      (await request(dashboard, `/api/claims/reset?token=${dashboard.token}`, { method: 'POST', body }))
        .status,
    ).toBe(401);
    const answer = await act(dashboard, '/api/claims/reset', body);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ reset: false, reason: 'no row: nothing to reset' });
  });

  it('refuses a Host other than its loopback address (DNS rebinding), bad input with 400, and unknown paths with 404', async () => {
    const rebound = await request(dashboard, '/api/state', {
      headers: { ...withToken(dashboard), host: `attacker.example:${dashboard.port}` },
    });
    expect(rebound.status).toBe(421);
    const bad = await act(dashboard, '/api/claims/reset', {
      group: 'no spaces allowed',
      key: 'k',
      attempt: 1,
    });
    expect(bad.status).toBe(400);
    expect((JSON.parse(bad.body) as { error: string }).error).toContain('not a valid consumer group');
    expect((await act(dashboard, '/api/dead-letters/replay', { group: 'g', ids: [] })).status).toBe(400);
    expect((await request(dashboard, '/nowhere', { headers: withToken(dashboard) })).status).toBe(404);
  });
});

describe('dashboard over a ledger whose table is missing', () => {
  const open = dashboards();
  const scratch = scratchDir();
  afterAll(() => {
    scratch.remove();
  });

  it('SQLite: shows the error naming the migrate command, creates no file, and shows the table once migrated', async () => {
    const path = join(scratch.dir, 'missing.db');
    const dashboard = await open({
      groups: [],
      store: { name: 'sqlite', target: { url: path, migrate: false } },
    });
    const before = await state(dashboard);
    expect(before.stuck).toMatchObject({ ok: false });
    expect(before.stuck?.ok === false && before.stuck.error).toContain('oncemq migrate --store sqlite');
    expect(before.failed).toMatchObject({ ok: false });
    expect(existsSync(path)).toBe(false);
    const ledger = new SqliteLedger({ database: path });
    await ledger.init();
    await ledger.close();
    const after = await state(dashboard);
    expect(after.stuck).toEqual({ ok: true, value: [] });
  });

  it('PostgreSQL: shows the error, creates no schema, and shows the table once migrated', async () => {
    const service = await findPostgres();
    if (!service.available) return;
    const pool = newPool(service.url);
    const schema = scratchSchema('oncemq_dash');
    try {
      const dashboard = await open({
        groups: [],
        store: { name: 'postgres', target: { url: service.url, schema, migrate: false } },
      });
      const before = await state(dashboard);
      expect(before.stuck?.ok === false && before.stuck.error).toContain(
        `oncemq migrate --store postgres --schema ${schema}`,
      );
      const schemas = await pool.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [
        schema,
      ]);
      expect(schemas.rowCount).toBe(0);
      const ledger = new PostgresLedger({ pool, schema });
      await ledger.init();
      await ledger.close();
      expect((await state(dashboard)).failed).toEqual({ ok: true, value: [] });
    } finally {
      await dropSchema(pool, schema);
      await pool.end();
    }
  });
});

/** The stores the claim views are tried on: a migrated ledger, the targets that reach it, and cleanup. */
interface ClaimStore {
  readonly name: string;
  setup(): Promise<{ ledger: Ledger; targets: DashboardTargets; teardown: () => Promise<void> } | undefined>;
}

const CLAIM_STORES: readonly ClaimStore[] = [
  {
    name: 'sqlite',
    setup() {
      const scratch = scratchDir();
      const path = join(scratch.dir, 'ledger.db');
      const ledger = new SqliteLedger({ database: path });
      return Promise.resolve({
        ledger,
        targets: { groups: [], store: { name: 'sqlite', target: { url: path, migrate: false } } },
        teardown: async () => {
          await ledger.close();
          scratch.remove();
        },
      });
    },
  },
  {
    name: 'postgres',
    async setup() {
      const service = await findPostgres();
      if (!service.available) return undefined;
      const pool = newPool(service.url);
      const schema = scratchSchema('oncemq_dash');
      const ledger = new PostgresLedger({ pool, schema });
      return {
        ledger,
        targets: {
          groups: [],
          store: { name: 'postgres', target: { url: service.url, schema, migrate: false } },
        },
        teardown: async () => {
          await ledger.close();
          await dropSchema(pool, schema);
          await pool.end();
        },
      };
    },
  },
];

describe.each(CLAIM_STORES)('dashboard claims on $name', (store) => {
  const open = dashboards();
  let setup: Awaited<ReturnType<ClaimStore['setup']>>;

  beforeEach(async () => {
    setup = await store.setup();
    await setup?.ledger.init();
  });

  afterEach(async () => {
    await setup?.teardown();
  });

  it('lists a stuck claim and resets it only while it keeps the owner and attempt shown', async () => {
    if (setup === undefined) return;
    const { ledger } = setup;
    const stuck = await ledger.claim({ ...pointsRequest('stuck <b>1</b>', 1), group: 'billing' });
    const live = await ledger.claim({ ...pointsRequest('live-1', 60_000), group: 'billing' });
    if (stuck.status !== 'acquired' || live.status !== 'acquired') throw new Error('claims not acquired');
    await waitUntil(() => Date.now() > stuck.claim.leaseUntil.getTime() + 5, 'the lease to end');
    const dashboard = await open(setup.targets);
    const shown = (await state(dashboard)).stuck;
    expect(shown?.ok).toBe(true);
    const rows = shown?.ok === true ? shown.value : [];
    expect(rows.map((row) => row.key)).toEqual(['stuck <b>1</b>']);
    expect(rows[0]).toMatchObject({
      group: 'billing',
      owner: stuck.claim.owner,
      attempt: 1,
      status: 'PROCESSING',
    });

    const key = 'stuck <b>1</b>';
    /** Presses reset with what the page would send, changed by `sent`; answers the reason, or 'reset'. */
    const reset = async (sent: Record<string, unknown>): Promise<string> => {
      const body = { group: 'billing', key, owner: stuck.claim.owner, attempt: 1, ...sent };
      const answer = JSON.parse((await act(dashboard, '/api/claims/reset', body)).body) as ResetAnswer;
      return answer.reset ? 'reset' : answer.reason;
    };
    expect(await reset({ owner: 'someone-else' })).toBe('the row changed: another owner holds the claim');
    expect(await reset({ attempt: 2 })).toBe('the row changed: attempt 1, not 2');
    expect(await reset({ key: 'live-1', owner: live.claim.owner })).toBe(
      'refused: the lease is live again (its owner renewed it)',
    );
    expect(await ledger.get('billing', key)).toBeDefined();
    expect(await ledger.get('billing', 'live-1')).toBeDefined();
    expect(await reset({})).toBe('reset');
    expect(await ledger.get('billing', 'stuck <b>1</b>')).toBeUndefined();
    expect((await state(dashboard)).stuck).toEqual({ ok: true, value: [] });
  });

  it('lists a failed claim with its error and resets neither it (its next delivery reclaims it) nor a SUCCESS row', async () => {
    if (setup === undefined) return;
    const { ledger } = setup;
    const failed = await ledger.claim({ ...pointsRequest('fail-1'), group: 'billing' });
    const done = await ledger.claim({ ...pointsRequest('done-1'), group: 'billing' });
    if (failed.status !== 'acquired' || done.status !== 'acquired') throw new Error('claims not acquired');
    await ledger.fail(failed.claim, 'TypeError: <img src=x onerror=alert(1)>');
    await ledger.complete(done.claim, null);
    const dashboard = await open(setup.targets);
    const shown = (await state(dashboard)).failed;
    expect(shown).toMatchObject({
      ok: true,
      value: [{ key: 'fail-1', status: 'FAIL', remark: 'TypeError: <img src=x onerror=alert(1)>' }],
    });
    const refused = await act(dashboard, '/api/claims/reset', {
      group: 'billing',
      key: 'done-1',
      attempt: 1,
    });
    expect(JSON.parse(refused.body)).toEqual({
      reset: false,
      reason: 'refused: the key was applied (SUCCESS); a reset would apply it again',
    });
    expect((await ledger.get('billing', 'done-1'))?.status).toBe('SUCCESS');
    const kept = await act(dashboard, '/api/claims/reset', { group: 'billing', key: 'fail-1', attempt: 1 });
    expect(JSON.parse(kept.body)).toEqual({
      reset: false,
      reason: 'not reset: a failed claim is reclaimed by its next delivery or a replay',
    });
    expect((await ledger.get('billing', 'fail-1'))?.status).toBe('FAIL');
  });
});

describe('dashboard dead letters on the local broker', () => {
  const open = dashboards();
  let scratch: ReturnType<typeof scratchDir>;
  let broker: LocalBroker;
  let db: Database.Database;
  let ledger: SqliteLedger<Database.Database>;

  beforeEach(async () => {
    scratch = scratchDir();
    broker = testBroker(scratch.dir, { commitInterval: '20ms' });
    db = new Database(':memory:');
    ledger = new SqliteLedger<Database.Database>({ database: db });
    await ledger.init();
    await broker.init();
  });

  afterEach(async () => {
    await broker.close();
    await ledger.close();
    db.close();
    scratch.remove();
  });

  it('replays a dead letter to the group: the fixed consumer applies it once', async () => {
    let broken = true;
    const outcomes: Outcome[] = [];
    const applied: string[] = [];
    const pipeline = createPipeline<Database.Database, { n: number }>({
      ledger,
      group: 'billing',
      onOutcome: (outcome) => outcomes.push(outcome),
      handler: (_event, ctx) => {
        if (broken) throw new PermanentError('invalid', 'the handler has a bug');
        applied.push(ctx.key);
      },
    });
    const subscription = await broker.subscribe('billing', ['invoices'], pipeline);
    try {
      await broker.publish({ topic: 'invoices', key: 'inv-1', body: { n: 1 } });
      await broker.publish({ topic: 'invoices', key: 'inv-2', body: { n: 2 } });
      await waitUntil(() => outcomes.filter((o) => o.kind === 'dead').length === 2, 'two dead letters');
      const dashboard = await open({
        groups: ['billing'],
        transport: { name: 'local', url: join(scratch.dir, 'broker.db') },
      });
      const shown = (await state(dashboard)).deadLetters?.billing;
      if (shown?.ok !== true) throw new Error(`dead letters not shown: ${JSON.stringify(shown)}`);
      expect(shown.value.map((letter) => letter.key)).toEqual(['inv-1', 'inv-2']);
      const [first, second] = shown.value;
      expect(first).toMatchObject({ reason: 'permanent-error', body: '{"n":1}', bodyEncoding: 'utf8' });
      expect(first?.error).toContain('the handler has a bug');

      broken = false;
      const replayed = await act(dashboard, '/api/dead-letters/replay', {
        group: 'billing',
        ids: [first?.id],
      });
      expect(JSON.parse(replayed.body)).toEqual({ requested: 1, done: 1 });
      await waitUntil(() => applied.includes('inv-1'), 'the replayed copy to be applied');
      const executed = outcomes.find((o) => o.kind === 'executed' && o.key === 'inv-1');
      expect(executed?.deliveryCount).toBe(1);

      const discarded = await act(dashboard, '/api/dead-letters/discard', {
        group: 'billing',
        ids: [second?.id],
      });
      expect(JSON.parse(discarded.body)).toEqual({ requested: 1, done: 1 });
      expect((await state(dashboard)).deadLetters?.billing).toEqual({ ok: true, value: [] });
      await broker.publish({ topic: 'invoices', key: 'inv-3', body: { n: 3 } });
      await waitUntil(() => applied.includes('inv-3'), 'a later message');
      expect(applied).toEqual(['inv-1', 'inv-3']);
    } finally {
      await subscription.close();
    }
  });

  it('shows a broker file that is not there as an error, and creates none', async () => {
    const missing = join(scratch.dir, 'elsewhere', 'broker.db');
    const dashboard = await open({ groups: ['billing'], transport: { name: 'local', url: missing } });
    const shown = (await state(dashboard)).deadLetters?.billing;
    expect(shown?.ok).toBe(false);
    expect(existsSync(missing)).toBe(false);
  });

  it('reads the outcome counters of a consumer from its Prometheus endpoint, by group', async () => {
    const endpoint = await servePrometheus({ port: 0 });
    const outcomes: Outcome[] = [];
    const pipeline = createPipeline<Database.Database, { n: number }>({
      ledger,
      group: 'billing',
      telemetry: { meterProvider: endpoint.meterProvider, tracerProvider: false, system: broker.name },
      onOutcome: (outcome) => outcomes.push(outcome),
      handler: () => undefined,
    });
    const subscription = await broker.subscribe('billing', ['invoices'], pipeline);
    try {
      await broker.publish({ topic: 'invoices', key: 'inv-1', body: { n: 1 } });
      await broker.publish({ topic: 'invoices', key: 'inv-1', body: { n: 1 } });
      await broker.publish({ topic: 'invoices', key: 'inv-2', body: 'not json' });
      await waitUntil(() => outcomes.length === 3, 'three outcomes');
      const dashboard = await open({ groups: ['billing'], metrics: endpoint.url });
      const metrics = (await state(dashboard)).metrics;
      expect(metrics).toMatchObject({
        ok: true,
        value: {
          deliveries: 3,
          outcomes: { executed: 1, duplicate: 1, dead: 1 },
          duplicates: { republish: 1, redelivery: 0 },
          deadLettered: { malformed: 1 },
        },
      });
      const elsewhere = await open({ groups: ['shipping'], metrics: endpoint.url });
      expect((await state(elsewhere)).metrics).toMatchObject({ ok: true, value: { deliveries: 0 } });
    } finally {
      await subscription.close();
      await endpoint.close();
    }
  });
});
