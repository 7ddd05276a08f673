// What the dashboard's HTTP API tests share: a request with any headers, the state and actions read and
// taken with the token, and dashboards opened as `oncemq dashboard` opens them.
import { request as httpRequest } from 'node:http';
import { afterEach, expect } from 'vitest';
import {
  type Dashboard,
  type DashboardState,
  type DashboardTargets,
  openDashboardSources,
  startDashboard,
} from './internal.js';

export interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

/** One HTTP request with any headers (Host included, which fetch does not let a caller set). */
export function request(
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

export const withToken = (dashboard: Dashboard): Record<string, string> => ({
  'x-oncemq-token': dashboard.token,
});

export async function state(dashboard: Dashboard): Promise<DashboardState> {
  const answer = await request(dashboard, '/api/state', { headers: withToken(dashboard) });
  expect(answer.status).toBe(200);
  return JSON.parse(answer.body) as DashboardState;
}

export function act(dashboard: Dashboard, path: string, body: unknown): Promise<Answer> {
  return request(dashboard, path, { method: 'POST', headers: withToken(dashboard), body });
}

/** A dashboard over `targets` as `oncemq dashboard` opens them; closed after the test. */
export function dashboards(): (targets: DashboardTargets) => Promise<Dashboard> {
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
