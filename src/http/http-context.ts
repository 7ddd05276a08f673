import type { Envelope } from '../core/envelope.js';
import { ConfigError } from '../core/errors.js';
import type { HandlerContext, HandlerOutbox, Mode } from '../consumer/handler-context.js';
import type { HttpRequest } from './http-request.js';

/**
 * What a route handler behind the edge gets: the pipeline's handler context — `ctx.tx` (the claim's
 * transaction, transactional mode), `ctx.signal` and `ctx.downstreamKey(step)` (leased mode),
 * `ctx.attempt` — and the request it runs for.
 */
export interface HttpContext<Tx> extends HandlerContext<Tx> {
  /** The request, as the edge read it (raw body included). */
  readonly request: HttpRequest;
  /** The principal the key is scoped by (`''` for an anonymous client). */
  readonly principal: string;
  /** The client's key as it sent it; the ledger key (`key`) is it scoped by route and principal. */
  readonly idempotencyKey: string;
}

/** The context of one run: the pipeline's context, and the request. */
export class HttpRunContext<Tx> implements HttpContext<Tx> {
  constructor(
    private readonly inner: HandlerContext<Tx>,
    readonly request: HttpRequest,
    readonly principal: string,
    readonly idempotencyKey: string,
  ) {}

  get envelope(): Envelope {
    return this.inner.envelope;
  }

  get group(): string {
    return this.inner.group;
  }

  get key(): string {
    return this.inner.key;
  }

  get attempt(): number {
    return this.inner.attempt;
  }

  get mode(): Mode {
    return this.inner.mode;
  }

  get tx(): Tx {
    return this.inner.tx;
  }

  get signal(): AbortSignal {
    return this.inner.signal;
  }

  get outbox(): HandlerOutbox {
    return this.inner.outbox;
  }

  downstreamKey(step?: string): string {
    return this.inner.downstreamKey(step);
  }
}

const contexts = new WeakMap<object, HttpContext<unknown>>();

/** Ties a run's context to the framework's request object, for {@link httpContext}. */
export function bindHttpContext(request: object, context: HttpContext<unknown>): void {
  contexts.set(request, context);
}

/**
 * The edge's context of a request, inside a route handler behind an adapter: Express `req`, Fastify
 * `request`, or the `IncomingMessage` of a `node:http` listener. `Tx` is the ledger's transaction type.
 * Throws a {@link ConfigError} for a request the edge has not claimed (the route is not behind it).
 *
 * @example
 * ```ts
 * app.post('/orders', express.raw({ type: '*\/*' }), idempotent, async (req, res) => {
 *   const ctx = httpContext<pg.PoolClient>(req);
 *   await ctx.tx.query('INSERT INTO orders …');
 *   res.status(201).json({ ok: true });
 * });
 * ```
 */
export function httpContext<Tx = unknown>(request: object): HttpContext<Tx> {
  const context = contexts.get(request);
  if (context === undefined) {
    throw new ConfigError(
      'httpContext',
      'this request was not claimed by an oncemq HTTP edge: put the route behind the edge (its middleware or hooks)',
    );
  }
  return context as HttpContext<Tx>;
}
