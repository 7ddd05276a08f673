import type { HttpEdge } from './http-edge.js';
import {
  answerThroughEdge,
  nodeHttpRequest,
  readBody,
  type IncomingMessageLike,
  type ServerResponseLike,
} from './node-message.js';

/** A `node:http` request listener, as `createServer(listener)` takes it. */
export type NodeListener<Req extends IncomingMessageLike, Res extends ServerResponseLike> = (
  req: Req,
  res: Res,
) => void | Promise<void>;

/**
 * Puts a `node:http` request listener behind the HTTP edge: the edge reads the body (at most
 * `maxBodyBytes`), claims the request's key, and calls `listener` only for a won claim. The listener
 * finds the edge's context with `httpContext(req)` — its `ctx.request.body` holds the bytes, since the
 * stream has been read — and answers on `res` as usual; the answer is held back until the claim, the
 * writes and the stored response have committed. A listener that throws (or rejects) before it ends
 * the response is a failed attempt (500).
 *
 * ```ts
 * createServer(nodeIdempotency(edge, async (req, res) => {
 *   const ctx = httpContext<pg.PoolClient>(req);
 *   await ctx.tx.query('INSERT INTO orders (body) VALUES ($1)', [ctx.request.body]);
 *   res.writeHead(201, { 'content-type': 'application/json' }).end('{"ok":true}');
 * }));
 * ```
 */
export function nodeIdempotency<Tx, Req extends IncomingMessageLike, Res extends ServerResponseLike>(
  edge: HttpEdge<Tx>,
  listener: NodeListener<Req, Res>,
): (req: Req, res: Res) => void {
  return (req, res) => {
    void respond(edge, listener, req, res);
  };
}

async function respond<Tx, Req extends IncomingMessageLike, Res extends ServerResponseLike>(
  edge: HttpEdge<Tx>,
  listener: NodeListener<Req, Res>,
  req: Req,
  res: Res,
): Promise<void> {
  let body: Uint8Array;
  try {
    body = await readBody(req, edge.maxBodyBytes);
  } catch {
    return; // the client went away while sending its body: nobody to answer
  }
  await answerThroughEdge(edge, nodeHttpRequest(req, body, { native: req }), req, res, (held) => {
    try {
      Promise.resolve(listener(req, res)).catch((error: unknown) => held.fail(error));
    } catch (error) {
      held.fail(error);
    }
  });
}
