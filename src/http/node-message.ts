import { bindHttpContext } from './http-context.js';
import type { HttpEdge } from './http-edge.js';
import type { HttpRequest } from './http-request.js';
import type { HttpResponse } from './http-response.js';

/** The part of a `node:http` `IncomingMessage` the adapters read (Express's `req` is one). */
export interface IncomingMessageLike extends AsyncIterable<unknown> {
  /** The request method. */
  readonly method?: string | undefined;
  /** The request target as received: path and query. */
  readonly url?: string | undefined;
  /** Headers by lower-case name, as `node:http` merges them. */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** Every header's values, each in its own array (Node 18.3+); preferred when present. */
  readonly headersDistinct?: Readonly<Record<string, readonly string[] | undefined>>;
  /** Whether the body has been read to its end (by a body parser, or by the edge). */
  readonly readableEnded?: boolean;
}

/** The part of a `node:http` `ServerResponse` the adapters write through (Express's `res` is one). */
export interface ServerResponseLike {
  /** The status code to send. */
  statusCode: number;
  /** Sets a header (replacing it). */
  setHeader(name: string, value: number | string | readonly string[]): unknown;
  /** The headers set so far, by lower-case name. */
  getHeaders(): Record<string, number | string | readonly string[] | undefined>;
  /** The names of the headers set so far. */
  getHeaderNames(): string[];
  /** Removes a header. */
  removeHeader(name: string): void;
  /** Sends the status line and headers (with optional headers to add). */
  writeHead(status: number, ...rest: unknown[]): unknown;
  /** Writes a part of the body. */
  write(chunk: unknown, ...rest: unknown[]): boolean;
  /** Ends the response, with an optional last part. */
  end(...args: unknown[]): unknown;
  /** Sends the headers at once. */
  flushHeaders?(): void;
}

/** A request's headers as {@link HttpRequest.headers}: lower-case names, repeated values joined with `", "`. */
export function joinedHeaders(message: IncomingMessageLike): Record<string, string | undefined> {
  const headers: Record<string, string | undefined> = {};
  const distinct = message.headersDistinct;
  if (distinct !== undefined) {
    for (const [name, values] of Object.entries(distinct))
      if (values !== undefined) headers[name] = values.join(', ');
    return headers;
  }
  for (const [name, value] of Object.entries(message.headers)) {
    if (value !== undefined) headers[name] = typeof value === 'string' ? value : value.join(', ');
  }
  return headers;
}

/** The path of a request target: before the `?`. */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

function bytesOf(chunk: unknown, encoding?: unknown): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === 'string')
    return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  throw new TypeError(`a body part must be a string or bytes, got ${typeof chunk}`);
}

/** Collects parts of a body, keeping at most `limit + 1` bytes: enough to tell that it was over `limit`. */
export class BodyCollector {
  readonly #parts: Uint8Array[] = [];
  #kept = 0;

  constructor(private readonly limit: number) {}

  /** Whether more than `limit` bytes came. */
  get over(): boolean {
    return this.#kept > this.limit;
  }

  add(chunk: unknown, encoding?: unknown): void {
    if (this.over) return;
    const bytes = bytesOf(chunk, encoding);
    const room = this.limit + 1 - this.#kept;
    const kept = bytes.byteLength > room ? bytes.subarray(0, room) : bytes;
    this.#parts.push(kept);
    this.#kept += kept.byteLength;
  }

  bytes(): Uint8Array {
    return this.#parts.length === 1 ? (this.#parts[0] as Uint8Array) : Buffer.concat(this.#parts);
  }
}

/** Reads a request's body to its end, keeping at most `limit + 1` bytes (the edge answers 413 past `limit`). */
export async function readBody(message: IncomingMessageLike, limit: number): Promise<Uint8Array> {
  const collector = new BodyCollector(limit);
  for await (const chunk of message) {
    collector.add(chunk);
    if (collector.over) break;
  }
  return collector.bytes();
}

/** An {@link HttpRequest} of a `node:http` request whose body has been read. */
export function nodeHttpRequest(
  message: IncomingMessageLike,
  body: Uint8Array,
  extra: { readonly url?: string; readonly route?: string | undefined; readonly native: unknown },
): HttpRequest {
  const url = extra.url ?? message.url ?? '/';
  return {
    method: (message.method ?? 'GET').toUpperCase(),
    path: pathOf(url),
    url,
    headers: joinedHeaders(message),
    body,
    route: extra.route,
    native: extra.native,
  };
}

/** The headers of a response as {@link HttpResponse.headers}: numbers as text. */
export function responseHeaders(
  headers: Readonly<Record<string, number | string | readonly string[] | undefined>>,
): Record<string, string | readonly string[]> {
  const out: Record<string, string | readonly string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[name.toLowerCase()] = typeof value === 'number' ? String(value) : value;
  }
  return out;
}

/** The methods of a response the capture takes over while the handler runs. */
const HELD_METHODS = ['writeHead', 'write', 'end', 'flushHeaders'] as const;
type HeldMethod = (typeof HELD_METHODS)[number];

/**
 * Holds back what a handler writes to a `ServerResponse` — status, headers, body — until the edge has
 * committed it: `done` gives the response the handler ended. `restore()` gives the response its own
 * methods back; {@link writeAnswer} then sends the edge's answer.
 */
export class ResponseCapture {
  readonly done: Promise<HttpResponse>;
  readonly #res: ServerResponseLike;
  readonly #own: readonly (readonly [HeldMethod, PropertyDescriptor | undefined])[];
  readonly #body: BodyCollector;
  #resolve!: (response: HttpResponse) => void;
  #reject!: (error: unknown) => void;
  #ended = false;

  constructor(res: ServerResponseLike, limit: number) {
    this.#res = res;
    this.#body = new BodyCollector(limit);
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // What the response had as its own (a wrapper such as compression's), or nothing: its class's method.
    this.#own = HELD_METHODS.map((name) => [name, Object.getOwnPropertyDescriptor(res, name)] as const);
    res.writeHead = (status: number, ...rest: unknown[]) => {
      res.statusCode = status;
      const headers = typeof rest[0] === 'string' ? rest[1] : rest[0];
      setHeaders(res, headers);
      return res;
    };
    res.write = (chunk: unknown, ...rest: unknown[]) => {
      this.#body.add(chunk, typeof rest[0] === 'string' ? rest[0] : undefined);
      const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
      if (callback !== undefined) process.nextTick(callback);
      return true;
    };
    res.end = (...args: unknown[]) => {
      const [chunk, encoding] = args;
      if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') {
        this.#body.add(chunk, typeof encoding === 'string' ? encoding : undefined);
      }
      this.#finish();
      return res;
    };
    if (res.flushHeaders !== undefined) res.flushHeaders = () => undefined;
  }

  #finish(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#resolve({
      status: this.#res.statusCode,
      headers: responseHeaders(this.#res.getHeaders()),
      body: this.#body.bytes(),
    });
  }

  /** The handler failed before it ended the response: the run fails with `error`. */
  fail(error: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#reject(error);
  }

  /** Gives the response its own methods back. */
  restore(): void {
    for (const [name, descriptor] of this.#own) {
      if (descriptor === undefined) Reflect.deleteProperty(this.#res, name);
      else Object.defineProperty(this.#res, name, descriptor);
    }
  }
}

function setHeaders(res: ServerResponseLike, headers: unknown): void {
  if (headers === undefined || headers === null) return;
  if (Array.isArray(headers)) {
    // [[name, value], …] or [name, value, name, value, …]
    const flat = headers as unknown[];
    const pairs: unknown[][] = Array.isArray(flat[0])
      ? (flat as unknown[][])
      : Array.from({ length: flat.length / 2 }, (_, i): unknown[] => [flat[2 * i], flat[2 * i + 1]]);
    for (const [name, value] of pairs) res.setHeader(String(name), String(value));
    return;
  }
  for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
    if (value !== undefined) res.setHeader(name, value as string | readonly string[]);
  }
}

/** Sends the edge's answer on a response nothing has been sent on: headers replaced, then the body. */
export function writeAnswer(res: ServerResponseLike, answer: HttpResponse): void {
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.statusCode = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  res.end(Buffer.from(answer.body.buffer, answer.body.byteOffset, answer.body.byteLength));
}

/**
 * Answers a `node:http`-style request through the edge: for a won claim, binds the context to `req`,
 * holds the response back and lets `run` start the handler (which writes to `res` as usual); then
 * sends the edge's answer — the handler's response once committed, or the edge's own.
 */
export async function answerThroughEdge<Tx>(
  edge: HttpEdge<Tx>,
  request: HttpRequest,
  req: object,
  res: ServerResponseLike,
  run: (capture: ResponseCapture) => void,
): Promise<void> {
  let capture: ResponseCapture | undefined;
  const answer = await edge.handle(request, (context) => {
    bindHttpContext(req, context);
    const held = new ResponseCapture(res, edge.maxResponseBytes);
    capture = held;
    run(held);
    return held.done;
  });
  capture?.restore();
  writeAnswer(res, answer);
}
