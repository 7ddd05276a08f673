/**
 * What every HTTP adapter turns its framework's request into: the one shape the edge's core, its key
 * sources and its verifiers read. Adapters fill it from Express, Fastify, `node:http` or a fetch
 * `Request`; a custom adapter builds it the same way.
 */
export interface HttpRequest {
  /** The request method, upper-case as received (`POST`). */
  readonly method: string;
  /** The URL's path, without the query, as received (percent-encoded): `/orders/42`. */
  readonly path: string;
  /** The path and the query as received: `/orders/42?expand=items`. */
  readonly url: string;
  /**
   * The headers, by lower-case name; a header sent more than once has its values joined with `", "`
   * (as `node:http` and fetch `Headers` do).
   */
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The body's bytes as received (after any transfer decoding the framework does), empty when there is none. */
  readonly body: Uint8Array;
  /**
   * The framework's route pattern when it knows one (`/orders/:id` in Express and Fastify); keys are
   * scoped by it. @default the path
   */
  readonly route?: string | undefined;
  /**
   * The framework's own request object (Express `req`, Fastify `request`, `IncomingMessage`, fetch
   * `Request`), for a principal function that reads what an earlier middleware set on it (`req.user`).
   */
  readonly native?: unknown;
}

/** A key source: the business key of a request, or `undefined` when it carries none. */
export type HttpKeySource = (request: HttpRequest) => string | undefined;

/** Runs before the claim; throws (any Error) to refuse the request with 401, never claiming the key. */
export type HttpVerifier = (request: HttpRequest) => void | Promise<void>;
