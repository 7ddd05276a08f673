import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import express from 'express';
import Fastify from 'fastify';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import mysql from 'mysql2/promise';
import { SILENT_LOGGER, type Ledger, type Mode } from 'oncemq';
import {
  createHttpEdge,
  expressIdempotency,
  fastifyIdempotency,
  fetchIdempotency,
  httpContext,
  keepRawBody,
  nodeIdempotency,
  type HttpContext,
  type HttpEdge,
  type HttpEdgeConfig,
} from 'oncemq/http';
import { MysqlLedger } from 'oncemq/mysql';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { SqliteLedger } from 'oncemq/sqlite';
import { mysqlService } from './mysql.js';
import { scratchDir } from './points.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from './postgres.js';

/**
 * A business database of the HTTP tests: an `orders` table the handler writes to (through `ctx.tx`
 * in transactional mode, on a connection of its own in leased mode), and the ledger beside it.
 */
export interface HttpDb {
  readonly name: 'postgres' | 'mariadb' | 'sqlite';
  /** A ledger on the database (a new instance each call). */
  ledger(): Ledger;
  /** Writes one order in the claim's transaction. */
  insert(tx: unknown, key: string, body: string): Promise<void>;
  /** Writes one order outside any claim (leased mode): its own connection, autocommit. */
  insertOutside(key: string, body: string): Promise<void>;
  /** Orders written with this key, or all. */
  count(key?: string): Promise<number>;
  /** Where the ledger is, as `oncemq ledger` and the dashboard take it. */
  readonly store: { readonly name: string; readonly url: string; readonly schema?: string };
  /** What a child process needs to open the same database: kind, url, schema or ''. */
  readonly childArgs: readonly string[];
  close(): Promise<void>;
}

/** A fresh schema with an `orders` table, on a pool large enough for many requests at once. */
async function postgresDb(url: string): Promise<HttpDb> {
  const schema = scratchSchema('oncemq_http');
  const pool = newPool(url, 10);
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(
    `CREATE TABLE "${schema}".orders (id serial PRIMARY KEY, idem text NOT NULL, body text NOT NULL)`,
  );
  const ledgers: Ledger[] = [];
  const count = async (key?: string): Promise<number> => {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT COUNT(*)::int AS n FROM "${schema}".orders WHERE $1::text IS NULL OR idem = $1`,
      [key ?? null],
    );
    return rows[0]?.n ?? 0;
  };
  return {
    name: 'postgres',
    ledger: () => {
      const ledger = new PostgresLedger({ pool, schema }) as Ledger;
      ledgers.push(ledger);
      return ledger;
    },
    insert: async (tx, key, body) => {
      await (tx as PgClientLike).query(`INSERT INTO "${schema}".orders (idem, body) VALUES ($1, $2)`, [
        key,
        body,
      ]);
    },
    insertOutside: async (key, body) => {
      await pool.query(`INSERT INTO "${schema}".orders (idem, body) VALUES ($1, $2)`, [key, body]);
    },
    count,
    store: { name: 'postgres', url, schema },
    childArgs: ['postgres', url, schema],
    close: async () => {
      for (const ledger of ledgers) await ledger.close();
      await dropSchema(pool, schema);
      await pool.end();
    },
  };
}

/** A database of its own on the MariaDB server, with an `orders` table. */
async function mariadbDb(url: string): Promise<HttpDb> {
  const database = `oncemq_http_${randomBytes(5).toString('hex')}`;
  const admin = await mysql.createConnection({ uri: url });
  await admin.query(`CREATE DATABASE \`${database}\``);
  const dbUrl = new URL(url);
  dbUrl.pathname = `/${database}`;
  const pool = mysql.createPool({ uri: dbUrl.toString(), connectionLimit: 10 });
  await pool.query(
    'CREATE TABLE orders (id int AUTO_INCREMENT PRIMARY KEY, idem varchar(255) NOT NULL, body text NOT NULL)',
  );
  const ledgers: Ledger[] = [];
  return {
    name: 'mariadb',
    ledger: () => {
      const ledger = new MysqlLedger({ pool }) as Ledger;
      ledgers.push(ledger);
      return ledger;
    },
    insert: async (tx, key, body) => {
      await (tx as mysql.PoolConnection).query('INSERT INTO orders (idem, body) VALUES (?, ?)', [key, body]);
    },
    insertOutside: async (key, body) => {
      await pool.query('INSERT INTO orders (idem, body) VALUES (?, ?)', [key, body]);
    },
    count: async (key) => {
      const [rows] = await pool.query('SELECT COUNT(*) AS n FROM orders WHERE ? IS NULL OR idem = ?', [
        key ?? null,
        key ?? null,
      ]);
      return Number((rows as { n: unknown }[])[0]?.n ?? 0);
    },
    store: { name: 'mysql', url: dbUrl.toString() },
    childArgs: ['mariadb', dbUrl.toString(), ''],
    close: async () => {
      for (const ledger of ledgers) await ledger.close();
      await pool.end();
      await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
      await admin.end();
    },
  };
}

/** A SQLite file in a scratch directory, with an `orders` table. */
function sqliteDb(): HttpDb {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'shop.db');
  const app = new Database(path);
  app.pragma('journal_mode = WAL');
  app.pragma('busy_timeout = 5000');
  app.exec('CREATE TABLE orders (id INTEGER PRIMARY KEY, idem TEXT NOT NULL, body TEXT NOT NULL)');
  const opened: Database.Database[] = [];
  const ledgers: Ledger[] = [];
  return {
    name: 'sqlite',
    ledger: () => {
      const database = new Database(path);
      database.pragma('busy_timeout = 5000');
      opened.push(database);
      const ledger = new SqliteLedger({ database }) as Ledger;
      ledgers.push(ledger);
      return ledger;
    },
    insert: (tx, key, body) => {
      (tx as Database.Database).prepare('INSERT INTO orders (idem, body) VALUES (?, ?)').run(key, body);
      return Promise.resolve();
    },
    insertOutside: (key, body) => {
      app.prepare('INSERT INTO orders (idem, body) VALUES (?, ?)').run(key, body);
      return Promise.resolve();
    },
    count: (key) =>
      Promise.resolve(
        (
          app
            .prepare('SELECT COUNT(*) AS n FROM orders WHERE ? IS NULL OR idem = ?')
            .get(key ?? null, key ?? null) as {
            n: number;
          }
        ).n,
      ),
    store: { name: 'sqlite', url: path },
    childArgs: ['sqlite', path, ''],
    close: async () => {
      for (const ledger of ledgers) await ledger.close();
      for (const database of opened) database.close();
      app.close();
      scratch.remove();
    },
  };
}

/** The databases of the HTTP tests; one that is not reachable is left out (with a warning). */
export const HTTP_DATABASES: readonly { readonly name: string; open(): Promise<HttpDb | undefined> }[] = [
  {
    name: 'postgres',
    async open() {
      const service = await findPostgres();
      return service.available ? postgresDb(service.url) : undefined;
    },
  },
  {
    name: 'mariadb',
    async open() {
      const service = await mysqlService();
      return service.available ? mariadbDb(service.url) : undefined;
    },
  },
  { name: 'sqlite', open: () => Promise.resolve(sqliteDb()) },
];

/** What a test route answers: a status, a JSON body (or bytes as they are), headers. */
export interface RouteAnswer {
  readonly status: number;
  readonly json?: unknown;
  readonly bytes?: Uint8Array;
  readonly headers?: Readonly<Record<string, string | string[]>>;
}

/** A test route's behaviour, the same behind every adapter. */
export type RouteBehaviour = (ctx: HttpContext<unknown>) => Promise<RouteAnswer>;

/**
 * The orders route: writes an order (through `ctx.tx` in transactional mode, beside it in leased
 * mode) and answers 201 with a fresh order id, so that a second run would answer other bytes.
 */
export function createOrder(db: HttpDb): RouteBehaviour {
  return async (ctx) => {
    const body = Buffer.from(ctx.request.body).toString('utf8');
    if (ctx.mode === 'transactional') await db.insert(ctx.tx, ctx.idempotencyKey, body);
    else await db.insertOutside(ctx.idempotencyKey, body);
    return {
      status: 201,
      json: { orderId: randomUUID(), attempt: ctx.attempt },
      headers: { location: `/orders/${ctx.idempotencyKey}` },
    };
  };
}

/** A running test server on an ephemeral loopback port. */
export interface TestServer {
  readonly url: string;
  close(): Promise<void>;
}

export type AdapterName = 'express' | 'fastify' | 'node' | 'hono';

function listening(server: Server): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    );
  });
}

function closing(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * A real server with `POST /orders/:shop` behind the edge through `adapter`, answering with
 * `behaviour`; Express and Fastify keep their parsed JSON body beside the raw bytes.
 */
export async function startServer(
  adapter: AdapterName,
  edge: HttpEdge<unknown>,
  behaviour: RouteBehaviour,
): Promise<TestServer> {
  switch (adapter) {
    case 'express': {
      const app = express();
      app.post(
        '/orders/:shop',
        express.json({ verify: keepRawBody, limit: '5mb' }),
        expressIdempotency(edge),
        async (req, res, next) => {
          try {
            const answer = await behaviour(httpContext(req));
            res.status(answer.status).set(answer.headers ?? {});
            if (answer.bytes === undefined) res.json(answer.json);
            else res.send(Buffer.from(answer.bytes));
          } catch (error) {
            next(error);
          }
        },
      );
      const server = createServer(app);
      return { url: await listening(server), close: () => closing(server) };
    }
    case 'fastify': {
      const app = Fastify({ bodyLimit: 5 * 1024 * 1024 });
      const hooks = fastifyIdempotency(edge);
      app.post('/orders/:shop', { ...hooks }, async (request, reply) => {
        const answer = await behaviour(httpContext(request));
        reply.code(answer.status).headers(answer.headers ?? {});
        return answer.bytes === undefined ? answer.json : Buffer.from(answer.bytes);
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      const address = app.server.address() as AddressInfo;
      return { url: `http://127.0.0.1:${address.port}`, close: () => app.close() };
    }
    case 'node': {
      const server = createServer(
        nodeIdempotency(edge, async (req, res) => {
          const answer = await behaviour(httpContext(req));
          res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
          res.end(answer.bytes ?? JSON.stringify(answer.json));
        }),
      );
      return { url: await listening(server), close: () => closing(server) };
    }
    case 'hono': {
      const app = new Hono();
      const handler = fetchIdempotency(
        edge,
        async (_request, ctx) => {
          const answer = await behaviour(ctx);
          const headers = new Headers();
          for (const [name, value] of Object.entries(answer.headers ?? {})) {
            for (const one of typeof value === 'string' ? [value] : value) headers.append(name, one);
          }
          if (answer.bytes !== undefined)
            return new Response(answer.bytes, { status: answer.status, headers });
          return Response.json(answer.json, { status: answer.status, headers });
        },
        { route: '/orders/:shop' },
      );
      app.post('/orders/:shop', (c) => handler(c.req.raw));
      const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
      if (!server.listening) await once(server, 'listening');
      return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => closing(server),
      };
    }
  }
}

/** An edge over `ledger` whose principal is the `x-user` header. */
export function testEdge(
  ledger: Ledger,
  extra: Partial<HttpEdgeConfig<unknown>> & { mode?: Mode } = {},
): HttpEdge<unknown> {
  return createHttpEdge({
    ledger,
    principal: (request) => request.headers['x-user'],
    telemetry: false,
    logger: SILENT_LOGGER,
    ...extra,
  });
}

/** A response read to its end: status, headers and the body's bytes. */
export interface Answered {
  readonly status: number;
  readonly headers: Headers;
  readonly bytes: Buffer;
  readonly json: unknown;
}

/** POSTs `body` (JSON) to `url` with `headers`. */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Answered> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-user': 'alice', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, bytes, json };
}
