// The dashboard's HTTP API asks for its token on every request: in a header or a cookie it set, never
// in the query for an action; it answers only its loopback Host.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteLedger } from 'oncemq/sqlite';
import { type Dashboard, openDashboardSources, startDashboard } from '../support/internal.js';
import { act, request, withToken } from '../support/dashboard.js';
import { scratchDir } from '../support/points.js';

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
