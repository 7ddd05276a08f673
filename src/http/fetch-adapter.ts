import type { HttpContext } from './http-context.js';
import type { HttpEdge } from './http-edge.js';
import type { HttpRequest } from './http-request.js';
import type { HttpResponse } from './http-response.js';

/** A handler of a fetch-style framework: a `Request` in, a `Response` out. */
export type FetchHandler<Tx> = (request: Request, context: HttpContext<Tx>) => Response | Promise<Response>;

/** Options of {@link fetchIdempotency}. */
export interface FetchIdempotencyOptions {
  /**
   * The route pattern the handler serves (`/orders/:id`), which keys are scoped by; a function gets
   * each request's. @default the request's path
   */
  readonly route?: string | ((request: Request) => string | undefined);
}

/** Statuses whose response has no body (the `Response` constructor refuses one). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** Reads a body stream to its end, keeping at most `limit + 1` bytes. */
async function readStream(body: ReadableStream<Uint8Array> | null, limit: number): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const parts: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      break;
    }
  }
  return parts.length === 1 ? (parts[0] as Uint8Array) : new Uint8Array(Buffer.concat(parts));
}

/** Headers as {@link HttpRequest.headers}: `Headers` already joins a repeated one with `", "`. */
function requestHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

async function toHttpResponse(response: Response, limit: number): Promise<HttpResponse> {
  const headers: Record<string, string | readonly string[]> = {};
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers['set-cookie'] = cookies;
  return { status: response.status, headers, body: await readStream(response.body, limit) };
}

function toResponse(answer: HttpResponse): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    for (const one of typeof value === 'string' ? [value] : value) headers.append(name, one);
  }
  return new Response(NULL_BODY.has(answer.status) ? null : answer.body, { status: answer.status, headers });
}

/**
 * Puts a fetch-style handler (`Request → Response`: Hono, route handlers of Next.js, Remix, SvelteKit,
 * Bun, Deno) behind the HTTP edge. The wrapped handler reads the body (at most `maxBodyBytes`), claims
 * the key, and calls `handler` only for a won claim, with a copy of the request whose body is intact
 * and the edge's context (`ctx.tx`, `ctx.downstreamKey(step)`); its response is answered once its
 * claim, writes and stored response have committed. A handler that throws is a failed attempt (500).
 *
 * ```ts
 * const createOrder = fetchIdempotency(edge, async (request, ctx) => {
 *   await ctx.tx.query('INSERT INTO orders (body) VALUES ($1)', [await request.text()]);
 *   return Response.json({ ok: true }, { status: 201 });
 * }, { route: '/orders' });
 * app.post('/orders', (c) => createOrder(c.req.raw)); // Hono
 * ```
 */
export function fetchIdempotency<Tx>(
  edge: HttpEdge<Tx>,
  handler: FetchHandler<Tx>,
  options: FetchIdempotencyOptions = {},
): (request: Request) => Promise<Response> {
  const route = options.route;
  return async (request) => {
    const forHandler = request.clone();
    const body = await readStream(request.body, edge.maxBodyBytes);
    const url = new URL(request.url);
    const httpRequest: HttpRequest = {
      method: request.method.toUpperCase(),
      path: url.pathname,
      url: url.pathname + url.search,
      headers: requestHeaders(request.headers),
      body,
      route: typeof route === 'function' ? route(request) : route,
      native: request,
    };
    const answer = await edge.handle(httpRequest, async (context) =>
      toHttpResponse(await handler(forHandler, context), edge.maxResponseBytes),
    );
    return toResponse(answer);
  };
}
