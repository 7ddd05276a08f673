import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createEnvelope, KEY_HEADER, type Envelope } from '../core/envelope.js';
import { errorText, PermanentError } from '../core/errors.js';
import { sha256Hex } from '../core/fingerprint.js';
import { normalizeKey } from '../core/key.js';
import { toLogger, type Logger } from '../core/logger.js';
import type { Outcome } from '../core/outcome.js';
import type { Serializer } from '../core/serializer.js';
import type { HandlerContext, Mode } from '../consumer/handler-context.js';
import type { PipelineMetrics } from '../consumer/metrics.js';
import { createPipeline, processKnown, type Pipeline } from '../consumer/pipeline.js';
import { fitFingerprint } from '../ledger/claim-request.js';
import type { Ledger, LedgerRecord } from '../ledger/ledger.js';
import { HttpRunContext, type HttpContext } from './http-context.js';
import {
  resolveHttpEdgeConfig,
  type HttpEdgeConfig,
  type ResolvedHttpEdgeConfig,
} from './http-edge-config.js';
import type { HttpRequest } from './http-request.js';
import {
  decodeStoredResponse,
  encodeStoredResponse,
  problemResponse,
  REPLAYED_HEADER,
  retryAfterSeconds,
  withRetryAfter,
  type HttpResponse,
} from './http-response.js';
import { readHttpRequest, type ReadRequest } from './request-reader.js';

/** Runs the route's handler for a claimed key and answers its response (the adapters capture it). */
export type HttpRun<Tx> = (context: HttpContext<Tx>) => HttpResponse | Promise<HttpResponse>;

/**
 * The HTTP edge: one pipeline over the ledger that every adapter (Express, Fastify, `node:http`,
 * fetch) drives. Each request becomes an envelope keyed by route, principal and key; the handler's
 * response is the stored result, replayed to later requests with the key.
 */
export interface HttpEdge<Tx> {
  /** The ledger group of the edge's rows. */
  readonly group: string;
  /** The mode of the edge's pipeline. */
  readonly mode: Mode;
  /** The most failed attempts of a key before it is dead (the retry policy's delays + 1). */
  readonly attempts: number;
  /** Largest request body accepted (adapters stop reading one byte past it). */
  readonly maxBodyBytes: number;
  /** Largest response body stored (adapters stop holding one byte past it). */
  readonly maxResponseBytes: number;
  /**
   * Answers one request: the handler's fresh response (after its claim, writes and stored response
   * committed), the stored response replayed, or the edge's own answer (400, 401, 409, 410, 413, 422,
   * 500, 503; docs/http.md). `run` is called at most once, only for a won claim. Never rejects for
   * anything a request or a handler does.
   */
  handle(request: HttpRequest, run: HttpRun<Tx>): Promise<HttpResponse>;
  /** The edge pipeline's counters: outcomes by kind, duplicates by source, dead letters by reason. */
  metrics(): PipelineMetrics;
  /** Refuses further requests (503). The ledger stays open: it is the caller's. */
  close(): void;
}

/** Why a run failed, as the answer to the client tells it. */
type Failure = 'status' | 'threw' | 'too-large';

/** One request on its way through the pipeline, found again by its envelope in the handler. */
interface Pending<Tx> extends ReadRequest {
  readonly request: HttpRequest;
  readonly run: HttpRun<Tx>;
  response?: HttpResponse;
  failure?: Failure;
}

/**
 * A failed attempt of a key — the handler answered 5xx, threw, or answered a response too large to
 * store — as the pipeline's outcome carries it and the FAIL row's remark records it.
 */
export class HttpAttemptError extends Error {
  /** Always `'HttpAttemptError'`. */
  override name = 'HttpAttemptError' as const;
}

/** The ledger keeps the stored response as it is: the handler returns it already encoded. */
const STORED_TEXT: Serializer = Object.freeze({
  serialize: (value: unknown): string => value as string,
  deserialize: (text: string): unknown => text,
});

class LedgerHttpEdge<Tx> implements HttpEdge<Tx> {
  readonly group: string;
  readonly mode: Mode;
  readonly attempts: number;
  readonly maxBodyBytes: number;
  readonly maxResponseBytes: number;
  readonly #config: ResolvedHttpEdgeConfig;
  readonly #ledger: Ledger<Tx>;
  readonly #pipeline: Pipeline;
  readonly #logger: Logger;
  readonly #pending = new WeakMap<Envelope, Pending<Tx>>();
  #closed = false;

  constructor(config: HttpEdgeConfig<Tx>) {
    this.#config = resolveHttpEdgeConfig(config);
    this.#ledger = config.ledger;
    this.#logger = toLogger(config.logger);
    const { group, retry, fingerprint } = this.#config;
    this.#pipeline = createPipeline<Tx, Uint8Array>({
      ledger: config.ledger,
      group,
      mode: config.mode,
      decode: 'bytes',
      fingerprint: fingerprint === false ? false : (envelope) => this.#of(envelope).print ?? '',
      retry,
      ...(config.lease === undefined ? {} : { lease: config.lease }),
      ...(config.renewEvery === undefined ? {} : { renewEvery: config.renewEvery }),
      serializer: STORED_TEXT,
      handler: (_body, context) => this.#run(context),
      ...(config.outbox === undefined ? {} : { outbox: config.outbox }),
      ...(config.onOutcome === undefined ? {} : { onOutcome: config.onOutcome }),
      ...(config.logger === undefined ? {} : { logger: config.logger }),
      ...(config.telemetry === undefined ? {} : { telemetry: config.telemetry }),
    });
    this.group = group;
    this.mode = this.#pipeline.mode;
    this.attempts = retry.maxReconsumeTimes + 1;
    this.maxBodyBytes = this.#config.maxBodyBytes;
    this.maxResponseBytes = this.#config.maxResponseBytes;
  }

  #of(envelope: Envelope): Pending<Tx> {
    const pending = this.#pending.get(envelope);
    if (pending === undefined) throw new Error('oncemq: an HTTP envelope without its request');
    return pending;
  }

  /** The pipeline's handler: runs the route, and returns its response as the stored result. */
  async #run(context: HandlerContext<Tx>): Promise<string> {
    const pending = this.#of(context.envelope);
    let response: HttpResponse;
    try {
      response = await pending.run(
        new HttpRunContext(context, pending.request, pending.principal, pending.idempotencyKey),
      );
    } catch (error) {
      pending.failure = 'threw';
      // On the edge every throw is a failed attempt, counted towards the key's end.
      throw error instanceof PermanentError
        ? new HttpAttemptError(this.#attemptText(`the handler threw ${errorText(error)}`, context.attempt), {
            cause: error,
          })
        : error;
    }
    pending.response = response;
    if (response.status >= 500) {
      pending.failure = 'status';
      throw new HttpAttemptError(
        this.#attemptText(`the handler answered ${response.status}`, context.attempt),
      );
    }
    const stored =
      response.body.byteLength <= this.#config.maxResponseBytes
        ? encodeStoredResponse(response, this.#config.storedHeaders)
        : undefined;
    if (stored === undefined) {
      pending.failure = 'too-large';
      throw new HttpAttemptError(
        this.#attemptText(
          `the response (${response.body.byteLength} bytes) is too large to store (maxResponseBytes ${this.#config.maxResponseBytes})`,
          context.attempt,
        ),
      );
    }
    return stored;
  }

  #attemptText(what: string, attempt: number): string {
    const last = attempt >= this.attempts;
    return `${what} (attempt ${attempt} of ${this.attempts}${last ? '; the key is dead: later requests with it are answered 410 until `oncemq ledger reset` deletes its row' : ''})`;
  }

  async handle(request: HttpRequest, run: HttpRun<Tx>): Promise<HttpResponse> {
    if (this.#closed) return problemResponse(503, 'unavailable', 'the server is shutting down');
    try {
      const read = await readHttpRequest(this.#config, this.#logger, request);
      if (!('key' in read)) return read;
      return await this.#claim({ ...read, request, run }, read.key);
    } catch (error) {
      this.#logger.error('oncemq: the HTTP edge failed a request', {
        group: this.group,
        path: request.path,
        error: errorText(error),
      });
      return problemResponse(500, 'internal', 'the request could not be processed');
    }
  }

  /** Claims the key through the pipeline (waiting for a running first request when configured) and answers. */
  async #claim(pending: Pending<Tx>, key: string): Promise<HttpResponse> {
    let normalized: string;
    try {
      normalized = normalizeKey(key);
    } catch (error) {
      return problemResponse(400, 'invalid-key', errorText(error));
    }
    const deadline = performance.now() + this.#config.waitMs;
    const fingerprint = pending.print === null ? null : fitFingerprint(sha256Hex(pending.print));
    for (;;) {
      let row: LedgerRecord | undefined;
      try {
        row = await this.#ledger.get(this.group, normalized);
      } catch (error) {
        return this.#unavailable(error, this.#config.retry.delaysMs[0] ?? 1000);
      }
      if (row?.status === 'FAIL') {
        if (row.fingerprint !== null && fingerprint !== null && row.fingerprint !== fingerprint) {
          return this.#reused();
        }
        if (row.attempt >= this.attempts) {
          return problemResponse(
            410,
            'key-dead',
            `this key failed ${row.attempt} times and was given up; send the request with a new key`,
          );
        }
      }
      const envelope = createEnvelope({
        brokerId: `http-${randomUUID()}`,
        topic: `${pending.request.method} ${pending.request.path}`,
        body: pending.request.body,
        headers: { [KEY_HEADER]: key },
        deliveryCount: row === undefined || row.status === 'SUCCESS' ? 1 : row.attempt + 1,
      });
      this.#pending.set(envelope, pending);
      // A completed key is answered from the row just read: a replay costs that one read.
      const outcome = await processKnown(this.#pipeline, envelope, row);
      if (outcome.kind !== 'busy') return this.#answer(outcome, pending);
      const left = deadline - performance.now();
      if (left <= 0) {
        return problemResponse(
          409,
          'in-flight',
          'a request with this key is still being processed; retry after it',
          { 'retry-after': retryAfterSeconds(outcome.delayMs) },
        );
      }
      await sleep(Math.min(outcome.delayMs, left));
    }
  }

  #reused(): HttpResponse {
    return problemResponse(
      422,
      'key-reused',
      'this key was used for another request (method, path or body differ); send a new key',
    );
  }

  #unavailable(error: unknown, delayMs: number): HttpResponse {
    this.#logger.warn('oncemq: the HTTP edge cannot reach its ledger', {
      group: this.group,
      error: errorText(error),
    });
    return problemResponse(
      503,
      'unavailable',
      'the request could not be recorded; nothing was applied, retry with the same key',
      { 'retry-after': retryAfterSeconds(delayMs) },
    );
  }

  /** The answer an outcome other than `busy` gives. */
  #answer(outcome: Exclude<Outcome, { kind: 'busy' }>, pending: Pending<Tx>): HttpResponse {
    switch (outcome.kind) {
      case 'executed':
        return pending.response ?? problemResponse(500, 'internal', 'the request ran without a response');
      case 'duplicate': {
        const stored = decodeStoredResponse(outcome.result);
        if (stored === undefined) {
          return problemResponse(
            500,
            'not-replayable',
            'a request with this key completed, but its response was not stored; send a new key',
          );
        }
        return { ...stored, headers: { ...stored.headers, [REPLAYED_HEADER]: 'true' } };
      }
      case 'conflict':
        return this.#reused();
      case 'retry':
      case 'dead':
        return this.#failed(outcome, pending);
    }
  }

  /** The answer to a request whose attempt failed, or whose ledger could not record it. */
  #failed(outcome: Extract<Outcome, { kind: 'retry' | 'dead' }>, pending: Pending<Tx>): HttpResponse {
    const delayMs = outcome.action === 'retry' ? outcome.delayMs : undefined;
    const retryable = (response: HttpResponse): HttpResponse =>
      delayMs === undefined ? response : withRetryAfter(response, delayMs);
    switch (pending.failure) {
      case 'status':
        return retryable(pending.response as HttpResponse);
      case 'threw':
        return retryable(problemResponse(500, 'handler-failed', 'the request failed; nothing was stored'));
      case 'too-large':
        return retryable(
          problemResponse(
            500,
            'response-too-large',
            `the response is larger than the ${this.#config.maxResponseBytes} bytes that can be stored; nothing was stored`,
          ),
        );
      case undefined:
        if (outcome.kind === 'dead' && outcome.reason === 'invalid-key') {
          return problemResponse(400, 'invalid-key', errorText(outcome.error));
        }
        if (outcome.kind === 'retry') return this.#unavailable(outcome.error, outcome.delayMs);
        this.#logger.error('oncemq: the HTTP edge could not complete a request', {
          group: this.group,
          key: outcome.key,
          error: errorText(outcome.error),
        });
        return problemResponse(500, 'internal', 'the request could not be completed; nothing was stored');
    }
  }

  metrics(): PipelineMetrics {
    return this.#pipeline.metrics();
  }

  close(): void {
    this.#closed = true;
    this.#pipeline.close();
  }
}

/**
 * The HTTP edge over a ledger: `Idempotency-Key` requests claimed in the ledger, their handler run
 * once per key, principal and route, the response stored and replayed. Adapters: `expressIdempotency`,
 * `fastifyIdempotency`, `nodeIdempotency`, `fetchIdempotency`. Checked here: a bad value throws a
 * ConfigError at start-up.
 */
export function createHttpEdge<Tx>(config: HttpEdgeConfig<Tx>): HttpEdge<Tx> {
  return new LedgerHttpEdge(config);
}
