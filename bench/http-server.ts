/**
 * The server of `npm run bench -- http`: one Express app on one PostgreSQL pool, with one route per
 * row, each doing the same write — one order row `(idem_key, item)` into a table of its own, answered
 * `201 {"id"}`:
 *
 *   POST /raw/orders       the bare route: one INSERT, autocommit
 *   POST /hand/orders      the claim written by hand: a read of the stored response, else BEGIN,
 *                          INSERT … ON CONFLICT DO NOTHING of the key, the order, the response stored, COMMIT
 *   POST /oncemq/orders    expressIdempotency(edge) over a PostgresLedger, the INSERT through ctx.tx
 *   POST /peer/express-idempotency/orders       express-idempotency with its Redis adapter
 *   POST /peer/node-idempotency/orders          @node-idempotency/core with its Redis storage adapter
 *
 * `GET /bench/state` answers the requests in flight, the process's CPU time and the statements sent to
 * PostgreSQL so far, so the load generator (another process) can wait for the server to be idle before
 * it counts rows, and charge CPU and statements to a row.
 * Started by bench/http.ts as a child process (argv[2]: the options as JSON; it sends `{ url }` over IPC
 * once listening and stops on SIGTERM), or in process by the test through {@link startHttpBenchServer}.
 */
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import type * as NodeIdempotency from '@node-idempotency/core';
import type * as NodeIdempotencyRedis from '@node-idempotency/storage-adapter-redis';
import express, { type Request, type Response } from 'express';
import type * as ExpressIdempotency from 'express-idempotency';
import type * as ExpressIdempotencyRedis from 'express-idempotency-redis-adapter';
import pg from 'pg';
import { createHttpEdge, expressIdempotency, httpContext, keepRawBody } from '../src/http.js';
import { PostgresLedger, type PgClientLike } from '../src/postgres.js';

/** The peer libraries the server can put in front of the route. */
export const HTTP_PEERS = ['express-idempotency', 'node-idempotency'] as const;
export type HttpPeer = (typeof HTTP_PEERS)[number];

export interface HttpBenchServerOptions {
  readonly postgresUrl: string;
  /** The schema (made by the caller) holding the order tables, the hand claims and the ledger. */
  readonly schema: string;
  /** Connections of the server's PostgreSQL pool (the load generator opens as many HTTP connections). */
  readonly connections: number;
  readonly redisUrl: string;
  readonly peers: readonly HttpPeer[];
  /** Prefix of every Redis key the peers write (their keys are deleted under it on close). */
  readonly redisPrefix: string;
}

export interface HttpBenchServer {
  readonly url: string;
  /** The peers that loaded and connected (a peer that did not is left out, with its reason). */
  readonly peers: readonly HttpPeer[];
  readonly skipped: Readonly<Record<string, string>>;
  close(): Promise<void>;
}

/** The order tables, one per row, all of one shape; made by the caller in `schema`. */
export const ORDER_TABLES = {
  raw: 'orders_raw',
  hand: 'orders_hand',
  oncemq: 'orders_oncemq',
  'express-idempotency': 'orders_express_idempotency',
  'node-idempotency': 'orders_node_idempotency',
} as const;

/** DDL of the server's tables (the ledger makes its own). */
export function httpBenchTables(schema: string): string[] {
  return [
    ...Object.values(ORDER_TABLES).map(
      (table) =>
        `CREATE TABLE "${schema}".${table} (id bigserial PRIMARY KEY, idem_key text NOT NULL, item text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
    ),
    `CREATE TABLE "${schema}".hand_claims (claim_key text PRIMARY KEY, response text, created_at timestamptz NOT NULL DEFAULT now())`,
  ];
}

const PEER_TTL_SECONDS = 3600;

interface OrderBody {
  readonly item: string;
}

const itemOf = (req: Request): string => (req.body as OrderBody).item;
const keyOf = (req: Request): string => req.get('idempotency-key') ?? '';

type Route = (req: Request, res: Response) => Promise<void>;

/** The express-idempotency route: its middleware, then the write unless the middleware replayed. */
async function expressIdempotencyRoute(
  options: HttpBenchServerOptions,
  insert: (req: Request) => Promise<number>,
): Promise<{ middleware: express.RequestHandler; route: Route; close: () => Promise<void> }> {
  const require = createRequire(import.meta.url);
  const library = require('express-idempotency') as typeof ExpressIdempotency;
  const RedisAdapter = (require('express-idempotency-redis-adapter') as typeof ExpressIdempotencyRedis)
    .default;
  const adapter = new RedisAdapter({ connectionConfig: { url: options.redisUrl }, ttl: PEER_TTL_SECONDS });
  await adapter.connect();
  const middleware = library.idempotency({ dataAdapter: adapter }) as unknown as express.RequestHandler;
  const service = library.getSharedIdempotencyService();
  return {
    middleware,
    route: async (req, res) => {
      // The middleware calls next() after it sent a stored response too: the route must ask.
      if (service.isHit(req as never)) return;
      res.status(201).json({ id: await insert(req) });
    },
    close: () => adapter.disconnect(),
  };
}

/**
 * @node-idempotency/core in front of the route: there is no Express package of it on the npm registry
 * (`@node-idempotency/express` is not published; its Nest plugin wants Nest 9 or 10), so this is the
 * glue its Nest interceptor is: `onRequest` before the handler (a stored response ends the request),
 * `onResponse` with the handler's answer before it is sent.
 */
async function nodeIdempotencyRoute(
  options: HttpBenchServerOptions,
  insert: (req: Request) => Promise<number>,
): Promise<{ route: Route; close: () => Promise<void> }> {
  const require = createRequire(import.meta.url);
  const { Idempotency } = require('@node-idempotency/core') as typeof NodeIdempotency;
  const { RedisStorageAdapter } =
    require('@node-idempotency/storage-adapter-redis') as typeof NodeIdempotencyRedis;
  const storage = new RedisStorageAdapter({ url: options.redisUrl });
  await storage.connect();
  const idempotency = new Idempotency(storage, {
    cacheKeyPrefix: options.redisPrefix,
    cacheTTLMS: PEER_TTL_SECONDS * 1000,
  });
  return {
    route: async (req, res) => {
      const params = {
        headers: req.headers as Record<string, unknown>,
        path: req.path,
        method: req.method,
        body: req.body as Record<string, unknown>,
      };
      let stored;
      try {
        stored = await idempotency.onRequest(params);
      } catch (error) {
        res.status(409).json({ error: (error as Error).message });
        return;
      }
      if (stored !== undefined) {
        res.status(Number(stored.additional?.status ?? 200)).json(stored.body);
        return;
      }
      const body = { id: await insert(req) };
      await idempotency.onResponse(params, { body, additional: { status: 201 } });
      res.status(201).json(body);
    },
    close: () => storage.disconnect(),
  };
}

/** Deletes the peers' Redis keys under the prefix. */
async function deletePeerKeys(redisUrl: string, prefix: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

export async function startHttpBenchServer(options: HttpBenchServerOptions): Promise<HttpBenchServer> {
  const { schema } = options;
  const pool = new pg.Pool({ connectionString: options.postgresUrl, max: options.connections });
  // Every statement sent to PostgreSQL, counted on each client of the pool: the round trips a row costs.
  let statements = 0;
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      statements++;
      return query(...args);
    };
  });
  const closers: (() => Promise<void>)[] = [];
  const skipped: Record<string, string> = {};
  const peers: HttpPeer[] = [];
  try {
    const ledger = new PostgresLedger({ pool, schema });
    await ledger.init();
    const edge = createHttpEdge<PgClientLike>({ ledger, principal: () => 'bench' });
    const insertSql = (table: string): string =>
      `INSERT INTO "${schema}".${table} (idem_key, item) VALUES ($1, $2) RETURNING id`;
    const idOf = (result: { rows: unknown[] }): number => (result.rows[0] as { id: number }).id;
    const insertInto =
      (table: string) =>
      async (req: Request): Promise<number> =>
        idOf(await pool.query(insertSql(table), [keyOf(req), itemOf(req)]));

    const app = express();
    let inFlight = 0;
    app.use((_req, res, next) => {
      inFlight++;
      res.on('close', () => inFlight--);
      next();
    });
    app.get('/bench/state', (_req, res) => {
      res.json({ inFlight: inFlight - 1, cpu: process.cpuUsage(), statements });
    });

    app.post('/raw/orders', express.json(), async (req, res) => {
      res.status(201).json({ id: await insertInto(ORDER_TABLES.raw)(req) });
    });

    const handClaims = `"${schema}".hand_claims`;
    const storedResponse = async (key: string): Promise<string | null | undefined> =>
      (
        (await pool.query(`SELECT response FROM ${handClaims} WHERE claim_key = $1`, [key])).rows[0] as
          { response: string | null } | undefined
      )?.response;
    app.post('/hand/orders', express.json(), async (req, res) => {
      const key = keyOf(req);
      const replay = (stored: string | null | undefined): void => {
        if (typeof stored === 'string')
          res.status(201).set('idempotent-replayed', 'true').type('json').send(stored);
        else res.status(409).json({ error: 'in flight' });
      };
      const before = await storedResponse(key);
      if (before !== undefined) {
        replay(before);
        return;
      }
      const client = await pool.connect();
      let body: string | undefined;
      try {
        await client.query('BEGIN');
        const claim = await client.query(
          `INSERT INTO ${handClaims} (claim_key) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1`,
          [key],
        );
        if (claim.rowCount === 1) {
          body = JSON.stringify({
            id: idOf(await client.query(insertSql(ORDER_TABLES.hand), [key, itemOf(req)])),
          });
          await client.query(`UPDATE ${handClaims} SET response = $2 WHERE claim_key = $1`, [key, body]);
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
      // Lost the claim: the winner's transaction has committed (the INSERT waited for its row lock).
      if (body === undefined) replay(await storedResponse(key));
      else res.status(201).type('json').send(body);
    });

    app.post(
      '/oncemq/orders',
      express.json({ verify: keepRawBody }),
      expressIdempotency(edge),
      async (req, res) => {
        const ctx = httpContext<PgClientLike>(req);
        const result = await ctx.tx.query(insertSql(ORDER_TABLES.oncemq), [keyOf(req), itemOf(req)]);
        res.status(201).json({ id: idOf(result) });
      },
    );

    for (const peer of options.peers) {
      try {
        const insert = insertInto(ORDER_TABLES[peer]);
        if (peer === 'express-idempotency') {
          const { middleware, route, close } = await expressIdempotencyRoute(options, insert);
          closers.push(close);
          app.post('/peer/express-idempotency/orders', express.json(), middleware, route);
        } else {
          const { route, close } = await nodeIdempotencyRoute(options, insert);
          closers.push(close);
          app.post('/peer/node-idempotency/orders', express.json(), route);
        }
        peers.push(peer);
      } catch (error) {
        skipped[peer] = (error as Error).message;
      }
    }

    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      peers,
      skipped,
      async close() {
        edge.close();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        for (const close of closers) await close().catch(() => undefined);
        if (peers.length > 0)
          await deletePeerKeys(options.redisUrl, options.redisPrefix).catch(() => undefined);
        await pool.end();
      },
    };
  } catch (error) {
    for (const close of closers) await close().catch(() => undefined);
    await pool.end();
    throw error;
  }
}

// Run as the child process of bench/http.ts (not when imported).
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const server = await startHttpBenchServer(JSON.parse(process.argv[2] ?? '{}') as HttpBenchServerOptions);
  process.send?.({ url: server.url, peers: server.peers, skipped: server.skipped });
  process.once('SIGTERM', () => {
    void server.close().finally(() => process.exit(0));
  });
}
