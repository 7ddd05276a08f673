import { Transform, type Readable } from 'node:stream';
import { bindHttpContext } from './http-context.js';
import type { HttpEdge } from './http-edge.js';
import type { HttpResponse } from './http-response.js';
import { BodyCollector, nodeHttpRequest, responseHeaders, type IncomingMessageLike } from './node-message.js';

/** The part of a Fastify request the hooks read. */
export interface FastifyRequestLike {
  /** The request target as received. */
  readonly url: string;
  /** The route's options; `url` is its pattern with the prefix (`/orders/:id`). */
  readonly routeOptions?:
    | {
        /** The route's pattern, prefix included. */
        readonly url?: string | undefined;
      }
    | undefined;
  /** The `node:http` request underneath. */
  readonly raw: IncomingMessageLike;
}

/** The part of a Fastify reply the hooks write through. */
export interface FastifyReplyLike {
  /** The status code to send. */
  readonly statusCode: number;
  /** Sets the status code. */
  code(status: number): unknown;
  /** Sets a header. */
  header(name: string, value: unknown): unknown;
  /** The headers set so far. */
  getHeaders(): Record<string, number | string | readonly string[] | undefined>;
  /** Removes a header. */
  removeHeader(name: string): unknown;
  /** Sends the response. */
  send(payload?: unknown): unknown;
}

/** The hooks of the HTTP edge for a Fastify route or plugin scope. */
export interface FastifyIdempotencyHooks {
  /** Keeps a copy of the raw body while Fastify's parser reads it (the route keeps its parsed `request.body`). */
  readonly preParsing: (
    request: FastifyRequestLike,
    reply: FastifyReplyLike,
    payload: Readable,
  ) => Promise<Readable>;
  /** Claims the key: lets the handler run for a won claim, else answers (replay, 409, 422, …) itself. */
  readonly preHandler: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>;
  /** Holds the handler's response back until its claim, writes and stored response have committed. */
  readonly onSend: (
    request: FastifyRequestLike,
    reply: FastifyReplyLike,
    payload: unknown,
  ) => Promise<unknown>;
}

/** A request on its way: the handler runs, and its response is awaited by onSend. */
interface Running {
  readonly finish: (response: HttpResponse) => void;
  readonly answer: Promise<HttpResponse>;
}

async function payloadBytes(payload: unknown, limit: number): Promise<Uint8Array> {
  if (payload === null || payload === undefined) return new Uint8Array(0);
  if (payload instanceof Uint8Array) return payload;
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (typeof (payload as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    const collector = new BodyCollector(limit);
    for await (const chunk of payload as AsyncIterable<unknown>) {
      collector.add(chunk);
      if (collector.over) break;
    }
    return collector.bytes();
  }
  throw new TypeError(`a Fastify payload the edge cannot read: ${typeof payload}`);
}

function bodyOf(answer: HttpResponse): Buffer | null {
  return answer.body.byteLength === 0
    ? null
    : Buffer.from(answer.body.buffer, answer.body.byteOffset, answer.body.byteLength);
}

/** Replaces whatever the reply holds by the edge's answer. */
function replace(reply: FastifyReplyLike, answer: HttpResponse): Buffer | null {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
  reply.code(answer.status);
  for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value);
  return bodyOf(answer);
}

/**
 * Fastify hooks of the HTTP edge. Add the three to the routes whose requests carry an
 * `Idempotency-Key` — on a route, or with `addHook` in a plugin scope:
 *
 * ```ts
 * const idempotent = fastifyIdempotency(edge);
 * app.post('/orders', { ...idempotent }, async (request, reply) => {
 *   const ctx = httpContext<pg.PoolClient>(request); // ctx.tx: the claim's transaction
 *   reply.code(201);
 *   return createOrder(ctx.tx, request.body);
 * });
 * ```
 *
 * `preParsing` keeps a copy of the raw bytes as Fastify's parser reads them (the parsed body stays in
 * `request.body`; Fastify's `bodyLimit` still applies, and a content type without a parser is
 * answered 415 by Fastify before the edge). `preHandler` claims the key and answers by itself when
 * the handler must not run; `onSend` holds the handler's response until it has committed with the
 * claim. A handler that never answers keeps its claim open.
 */
export function fastifyIdempotency<Tx>(edge: HttpEdge<Tx>): FastifyIdempotencyHooks {
  const bodies = new WeakMap<object, BodyCollector>();
  const running = new WeakMap<object, Running>();
  return {
    preParsing: (request, _reply, payload) => {
      const collector = new BodyCollector(edge.maxBodyBytes);
      bodies.set(request, collector);
      let received = 0;
      const tee = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          collector.add(chunk);
          received += chunk.length;
          (tee as { receivedEncodedLength?: number }).receivedEncodedLength =
            (payload as { receivedEncodedLength?: number }).receivedEncodedLength ?? received;
          done(null, chunk);
        },
      });
      payload.on('error', (error) => tee.destroy(error));
      return Promise.resolve(payload.pipe(tee));
    },
    preHandler: async (request, reply) => {
      const body = bodies.get(request)?.bytes() ?? new Uint8Array(0);
      const httpRequest = nodeHttpRequest(request.raw, body, {
        url: request.url,
        route: request.routeOptions?.url,
        native: request,
      });
      let open!: (gate: 'run' | HttpResponse) => void;
      const gate = new Promise<'run' | HttpResponse>((resolve) => (open = resolve));
      const answer = edge.handle(httpRequest, (context) => {
        bindHttpContext(request, context);
        return new Promise<HttpResponse>((finish) => {
          running.set(request, { finish, answer });
          open('run');
        });
      });
      void answer.then(open);
      const opened = await gate;
      if (opened === 'run') return undefined;
      reply.send(replace(reply, opened));
      return reply;
    },
    onSend: async (request, reply, payload) => {
      const run = running.get(request);
      if (run === undefined) return payload; // answered by the edge itself
      running.delete(request);
      const streamed = typeof payload === 'object' && payload !== null && !(payload instanceof Uint8Array);
      const response: HttpResponse = {
        status: reply.statusCode,
        headers: responseHeaders(reply.getHeaders()),
        body: await payloadBytes(payload, edge.maxResponseBytes),
      };
      run.finish(response);
      const answer = await run.answer;
      if (answer === response) return streamed ? bodyOf(answer) : payload;
      return replace(reply, answer);
    },
  };
}
