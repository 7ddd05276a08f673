// The dashboard over real ledgers: a missing ledger table shown as an error (and never created), and
// stuck and failed claims reset only while they are still the row shown.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Ledger } from 'oncemq';
import { PostgresLedger } from 'oncemq/postgres';
import { SqliteLedger } from 'oncemq/sqlite';
import type { DashboardTargets, ResetAnswer } from '../support/internal.js';
import { act, dashboards, state } from '../support/dashboard.js';
import { waitUntil } from '../support/local-points.js';
import { pointsRequest, scratchDir } from '../support/points.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';

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
