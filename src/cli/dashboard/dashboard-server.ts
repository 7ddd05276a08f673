import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { errorText } from '../../core/errors.js';
import { listen } from '../../telemetry/prometheus-endpoint.js';
import { DASHBOARD_CSS, DASHBOARD_JS, dashboardPage } from './dashboard-assets.js';
import { DashboardApi, DashboardInputError } from './dashboard-api.js';
import type { DashboardSources } from './dashboard-sources.js';

/** Input of {@link startDashboard}. */
export interface DashboardConfig {
  /** Port on 127.0.0.1; 0 takes a free one (read it from `url`). @default 0 */
  readonly port?: number;
  /** The access token; a fresh random one (32 bytes, hex) when absent. */
  readonly token?: string;
}

/** A running dashboard. */
export interface Dashboard {
  /** `http://127.0.0.1:PORT/` */
  readonly url: string;
  /** The URL with the token: what to open in a browser. */
  readonly openUrl: string;
  readonly token: string;
  readonly port: number;
  /**
   * Resolves when a page holding the token first asks for the state (`GET /api/state`): a browser
   * shows the dashboard. Never rejects.
   */
  readonly opened: Promise<void>;
  /** Stops the server and closes the sources the dashboard opened. */
  close(): Promise<void>;
}

/** The header actions carry the token in (a cookie alone never authorizes an action). */
export const TOKEN_HEADER = 'x-oncemq-token';
const COOKIE = 'oncemq_dashboard';
const HOST = '127.0.0.1';
/** Largest action body read. */
const MAX_BODY_BYTES = 64 * 1024;

const SECURITY_HEADERS = Object.freeze({
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
});

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string,
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, ...extra });
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(value));
}

function sameToken(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookieToken(req: IncomingMessage): string | undefined {
  for (const pair of (req.headers.cookie ?? '').split(';')) {
    const [name, ...value] = pair.trim().split('=');
    if (name === COOKIE) return value.join('=');
  }
  return undefined;
}

function headerToken(req: IncomingMessage): string | undefined {
  const header = req.headers[TOKEN_HEADER];
  if (typeof header === 'string') return header;
  const bearer = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '');
  return bearer?.[1];
}

/**
 * How the request proves it holds the token: an action (POST) only by a header, which a page of
 * another origin cannot set without a CORS preflight that this server never grants; a read also by
 * the `token` query parameter of the printed URL or the cookie the page set.
 */
function authorized(req: IncomingMessage, url: URL, token: string): boolean {
  if (sameToken(headerToken(req), token)) return true;
  if (req.method !== 'GET') return false;
  return sameToken(url.searchParams.get('token') ?? undefined, token) || sameToken(cookieToken(req), token);
}

function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new DashboardInputError(`the request body is larger than ${MAX_BODY_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown);
      } catch {
        reject(new DashboardInputError('the request body is not JSON'));
      }
    });
  });
}

/**
 * Serves the dashboard on 127.0.0.1: the page, its script and style (shipped in the package, no
 * CDN), a JSON API the page polls, and POST actions. Every request needs the token (401 without);
 * a Host other than this loopback address and port is refused (421), against DNS rebinding.
 */
export async function startDashboard(
  sources: DashboardSources,
  config: DashboardConfig = {},
): Promise<Dashboard> {
  const token = config.token ?? randomBytes(32).toString('hex');
  const api = new DashboardApi(sources);
  let port = 0;
  let pageOpened: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    pageOpened = resolve;
  });
  const actions: Readonly<Record<string, (body: unknown) => Promise<unknown>>> = {
    '/api/claims/reset': (body) => api.resetClaim(body),
    '/api/dead-letters/replay': (body) => api.replay(body),
    '/api/dead-letters/discard': (body) => api.discard(body),
  };
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const hosts = [`${HOST}:${port}`, `localhost:${port}`];
    if (!hosts.includes(req.headers.host ?? '')) {
      send(res, 421, 'text/plain; charset=utf-8', `oncemq dashboard: open it as http://${HOST}:${port}/\n`);
      return;
    }
    const url = new URL(req.url ?? '/', `http://${HOST}:${port}`);
    if (!authorized(req, url, token)) {
      send(
        res,
        401,
        'text/plain; charset=utf-8',
        'oncemq dashboard: this needs the access token; open the URL printed when the dashboard started\n',
      );
      return;
    }
    const route = `${req.method ?? 'GET'} ${url.pathname}`;
    switch (route) {
      case 'GET /':
        send(res, 200, 'text/html; charset=utf-8', dashboardPage(token), {
          'set-cookie': `${COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`,
        });
        return;
      case 'GET /dashboard.js':
        send(res, 200, 'text/javascript; charset=utf-8', DASHBOARD_JS);
        return;
      case 'GET /dashboard.css':
        send(res, 200, 'text/css; charset=utf-8', DASHBOARD_CSS);
        return;
      case 'GET /api/state':
        sendJson(res, 200, await api.state());
        pageOpened();
        return;
    }
    const action = req.method === 'POST' ? actions[url.pathname] : undefined;
    if (action === undefined) {
      sendJson(res, 404, { error: `no such page or action: ${route}` });
      return;
    }
    if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
      sendJson(res, 415, { error: 'actions take a JSON body (content-type: application/json)' });
      return;
    }
    sendJson(res, 200, await action(await readBody(req)));
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      const status = error instanceof DashboardInputError ? 400 : 500;
      if (!res.headersSent) sendJson(res, status, { error: errorText(error) });
      else res.destroy();
    });
  });
  port = await listen(server, config.port ?? 0, HOST);
  const base = `http://${HOST}:${port}/`;
  return {
    url: base,
    openUrl: `${base}?token=${token}`,
    token,
    port,
    opened,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      });
      await Promise.all([sources.ledger?.close(), sources.deadLetters?.close(), sources.metrics?.close?.()]);
    },
  };
}
