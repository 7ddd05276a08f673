import { ConfigError } from '../core/errors.js';
import type { HttpEdge } from './http-edge.js';
import {
  answerThroughEdge,
  nodeHttpRequest,
  readBody,
  type IncomingMessageLike,
  type ServerResponseLike,
} from './node-message.js';

/** The part of an Express request the middleware reads. */
export interface ExpressRequestLike extends IncomingMessageLike {
  /** The URL as received, before any router stripped its mount path. */
  readonly originalUrl?: string;
  /** The mount path of the router the route is in. */
  readonly baseUrl?: string;
  /** The matched route, when the middleware is mounted on one (`app.post('/orders/:id', idempotent, …)`). */
  readonly route?:
    | {
        /** The route's path pattern (`/orders/:id`), relative to {@link baseUrl}. */
        readonly path?: unknown;
      }
    | undefined;
  /** What a body parser left: bytes from `express.raw()`, or a parsed body. */
  readonly body?: unknown;
  /** The raw bytes kept by {@link keepRawBody} in a parser's `verify` option. */
  readonly rawBody?: unknown;
}

/** Express's `next`. */
export type ExpressNext = (error?: unknown) => void;

/** An Express middleware. */
export type ExpressMiddleware = (req: ExpressRequestLike, res: ServerResponseLike, next: ExpressNext) => void;

/**
 * For a body parser's `verify` option (`express.json({ verify: keepRawBody })`): keeps the bytes the
 * parser read as `req.rawBody`, so that the edge fingerprints and verifies the raw body while the
 * handler gets the parsed one.
 */
export function keepRawBody(req: object, _res: unknown, bytes: Uint8Array): void {
  (req as { rawBody?: Uint8Array }).rawBody = bytes;
}

const NO_RAW_BODY =
  "the request body was parsed before the oncemq edge and its bytes were not kept: give the parser `verify: keepRawBody` (express.json({ verify: keepRawBody })), use express.raw({ type: '*/*' }), or mount the edge before any body parser";

/** The raw body of an Express request: kept by a parser, left as bytes by `express.raw()`, or read here. */
async function expressBody(req: ExpressRequestLike, limit: number): Promise<Uint8Array> {
  if (req.rawBody instanceof Uint8Array) return req.rawBody;
  if (req.body instanceof Uint8Array) return req.body;
  if (req.readableEnded !== true) {
    const body = await readBody(req, limit);
    (req as { rawBody?: Uint8Array }).rawBody = body;
    return body;
  }
  if (req.body === undefined) return new Uint8Array(0); // read to its end, and nothing parsed: no body
  throw new ConfigError('express', NO_RAW_BODY);
}

/** The route pattern of an Express request, with its router's mount path. */
function expressRoute(req: ExpressRequestLike): string | undefined {
  const path = req.route?.path;
  return typeof path === 'string' ? `${req.baseUrl ?? ''}${path}` : undefined;
}

/**
 * Express middleware of the HTTP edge. Mount it on the routes whose requests carry an
 * `Idempotency-Key`, before their handler:
 *
 * ```ts
 * const idempotent = expressIdempotency(edge);
 * app.post('/orders', express.json({ verify: keepRawBody }), idempotent, async (req, res) => {
 *   const ctx = httpContext<pg.PoolClient>(req); // ctx.tx: the claim's transaction
 *   res.status(201).json(await createOrder(ctx.tx, req.body));
 * });
 * ```
 *
 * The raw body is fingerprinted: the middleware takes it from `req.rawBody` (a parser's `verify:
 * keepRawBody`), from `req.body` bytes (`express.raw()`), or reads the stream itself when no parser ran
 * (the handler then finds the bytes in `req.rawBody`). The handler's response is held back until its
 * claim, writes and stored response have committed, then sent; a replay or a refusal is sent without
 * running the handler. A handler that never answers keeps its claim (and, in transactional mode, its
 * transaction) open.
 */
export function expressIdempotency<Tx>(edge: HttpEdge<Tx>): ExpressMiddleware {
  return (req, res, next) => {
    void respond(edge, req, res, next);
  };
}

async function respond<Tx>(
  edge: HttpEdge<Tx>,
  req: ExpressRequestLike,
  res: ServerResponseLike,
  next: ExpressNext,
): Promise<void> {
  let body: Uint8Array;
  try {
    body = await expressBody(req, edge.maxBodyBytes);
  } catch (error) {
    next(error);
    return;
  }
  const request = nodeHttpRequest(req, body, {
    ...(req.originalUrl === undefined ? {} : { url: req.originalUrl }),
    route: expressRoute(req),
    native: req,
  });
  await answerThroughEdge(edge, request, req, res, () => {
    next();
  });
}
