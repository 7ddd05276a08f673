import { parseDuration, type Duration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import { validateGroup } from '../core/group.js';
import type { LoggerLike } from '../core/logger.js';
import type { Outcome } from '../core/outcome.js';
import type { Mode } from '../consumer/handler-context.js';
import { RetryPolicy, type RetryPolicyConfig } from '../core/retry-policy.js';
import type { Ledger } from '../ledger/ledger.js';
import type { Outbox } from '../outbox/outbox.js';
import type { TelemetryConfig } from '../telemetry/pipeline-telemetry.js';
import type { HttpKeySource, HttpRequest, HttpVerifier } from './http-request.js';
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_STORED_HEADERS,
  FRAMING_HEADERS,
  MAX_STORED_RESPONSE_BYTES,
} from './http-response.js';
import { IDEMPOTENCY_KEY_SOURCE } from './idempotency-key.js';

/** Who sends a request (a user, a tenant, an API client): keys are scoped by it. */
export type HttpPrincipal = (request: HttpRequest) => string | undefined | Promise<string | undefined>;

/** What a request's payload fingerprint is taken from; a function returns the bytes or text to hash. */
export type HttpFingerprint = boolean | ((request: HttpRequest) => string | Uint8Array);

/** What a request gets while another request with its key is running: 409 at once, or a wait for its answer. */
export type HttpInFlight =
  | 'reject'
  | {
      /** The longest a request waits for the answer of the request running with its key. */
      readonly wait: Duration;
    };

/**
 * Input of `createHttpEdge(config)`: the ledger, who the client is, and how keys, fingerprints,
 * failures and sizes are handled. Checked at `createHttpEdge`: a bad value throws a
 * {@link ConfigError} there, never at the first request.
 */
export interface HttpEdgeConfig<Tx> {
  /**
   * Where keys are claimed and responses stored: a SQL ledger in the business database (the
   * handler's writes through `ctx.tx` then commit with the claim and the stored response), or a
   * Redis or tiered ledger in leased mode.
   */
  readonly ledger: Ledger<Tx>;
  /**
   * Who sends the request — a user id, a tenant, an API client — read from the request (a header, or
   * what an authentication middleware left on `request.native`). Keys are scoped by it, so two
   * clients' keys never meet: without it, a client could be answered another client's stored
   * response. Return `undefined` (or `''`) for an anonymous client; `() => ''` makes every client share
   * one key space. A throw answers 401. Required.
   */
  readonly principal: HttpPrincipal;
  /** The ledger's consumer group of the edge's rows (`oncemq ledger failed --group http`). @default 'http' */
  readonly group?: string;
  /** Where the key comes from. @default the `Idempotency-Key` header (IDEMPOTENCY_KEY_SOURCE) */
  readonly key?: HttpKeySource;
  /**
   * Whether a request without a key is refused (400). With `false` such a request runs once under a
   * fresh key of its own: it is not deduplicated, but its handler has the same `ctx`. @default true
   */
  readonly required?: boolean;
  /** Checks the request before its key is claimed (a signature); a throw answers 401. @default none */
  readonly verify?: HttpVerifier;
  /**
   * The route part of a key's scope: the same key on two routes is two keys.
   * @default the framework's route pattern (`request.route`), else the path
   */
  readonly scope?: (request: HttpRequest) => string;
  /**
   * The request fingerprint recorded with the key: the same key with another fingerprint is answered
   * 422. `true` hashes the method, the path and the body; a function returns what to hash instead
   * (leave out a field a client's retry changes); `false` turns the check off. @default true
   */
  readonly fingerprint?: HttpFingerprint;
  /**
   * How the claim and the handler's effect relate: `transactional` (the handler's writes through
   * `ctx.tx` commit with the claim and the stored response) or `leased` (effects outside the database;
   * `ctx.downstreamKey(step)` for the calls). @default 'transactional' when the ledger can, else 'leased'
   */
  readonly mode?: Mode;
  /**
   * Attempts of a key whose handler fails (answers 5xx or throws): a failed attempt may be retried by
   * the client after `delays[n]` (sent as `Retry-After`); after `delays.length + 1` failed attempts the
   * key is dead — a FAIL row in the ledger, answered 410 until an operator resets it. Immediate
   * retries are refused (a response cannot be written twice). @default { delays: ['1s', '5s'] }: 3 attempts
   */
  readonly retry?: RetryPolicy | RetryPolicyConfig;
  /**
   * What a request gets while the first request with its key is running (leased mode: its lease is
   * live): `'reject'` answers 409 with `Retry-After`; `{ wait }` waits up to that long for the first
   * request's answer, then answers 409. In transactional mode the database makes a second claim wait
   * for the first one's transaction, so the replay comes without either. @default 'reject'
   */
  readonly inFlight?: HttpInFlight;
  /** Lease of a leased claim: a crashed server's key is in flight (409) until it ends. @default '30s' */
  readonly lease?: Duration;
  /** How often a running handler's lease is renewed (at most a third of it). @default a third of the lease */
  readonly renewEvery?: Duration;
  /**
   * The response headers stored and replayed with a response (lower-case names); framing headers
   * (`content-length`, `transfer-encoding`, `date`…) are refused. @default DEFAULT_STORED_HEADERS
   */
  readonly storedHeaders?: readonly string[];
  /** Largest request body accepted, in bytes; a larger one is answered 413 before any claim. @default 1 MiB */
  readonly maxBodyBytes?: number;
  /**
   * Largest response body stored, in bytes (at most 720 KiB, the ledger's 1 MiB limit on a stored
   * result, base64 included). A larger response is a failed attempt answered 500, never half stored.
   * @default 512 KiB
   */
  readonly maxResponseBytes?: number;
  /** The transactional outbox: the handler writes follow-up messages with `ctx.outbox.add(…)`. @default none */
  readonly outbox?: Outbox<Tx>;
  /** Called with every outcome of the edge's pipeline, after the ledger has recorded it. */
  readonly onOutcome?: (outcome: Outcome) => void;
  /** Where log lines go (console, pino, …). @default DEFAULT_LOGGER */
  readonly logger?: LoggerLike;
  /** OpenTelemetry metrics and spans of the edge's pipeline; `false` turns them off. @default the global providers */
  readonly telemetry?: TelemetryConfig | false;
}

/** Defaults of the {@link HttpEdgeConfig} fields that have a fixed one. */
export const DEFAULT_HTTP_EDGE_CONFIG = Object.freeze({
  /** The ledger group of the edge's rows. */
  group: 'http',
  /** A request without a key is refused with 400. */
  required: true,
  /** Two retries after a failed attempt, 1 s and 5 s apart: three attempts, then the key is dead. */
  retry: Object.freeze({
    /** The policy's name in messages. */
    name: 'http',
    /** Waits before the second and the third attempt, sent as `Retry-After`. */
    delays: Object.freeze(['1s', '5s']),
  }),
  /** A request arriving while its key runs elsewhere is answered 409 at once. */
  inFlight: 'reject',
  /** Request bodies up to 1 MiB. */
  maxBodyBytes: 1024 * 1024,
  /** Stored response bodies up to 512 KiB. */
  maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
} as const);

/** An edge's configuration, checked, with its defaults. */
export interface ResolvedHttpEdgeConfig {
  readonly group: string;
  readonly principal: HttpPrincipal;
  readonly key: HttpKeySource;
  readonly required: boolean;
  readonly verify: HttpVerifier | undefined;
  readonly scope: (request: HttpRequest) => string;
  readonly fingerprint: HttpFingerprint;
  readonly retry: RetryPolicy;
  /** How long a request waits for its key's first request; 0 answers 409 at once. */
  readonly waitMs: number;
  readonly storedHeaders: ReadonlySet<string>;
  readonly maxBodyBytes: number;
  readonly maxResponseBytes: number;
}

function requireFunction(value: unknown, field: string, fix: string): void {
  if (typeof value !== 'function') throw new ConfigError(field, `must be a function: ${fix}`);
}

function byteLimit(value: unknown, field: string, fallback: number, most: number): number {
  const limit = value ?? fallback;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 0 || limit > most) {
    throw new ConfigError(
      field,
      `must be a whole number of bytes from 0 to ${most}, got ${JSON.stringify(limit)}`,
    );
  }
  return limit;
}

function resolveRetry(retry: RetryPolicy | RetryPolicyConfig | undefined): RetryPolicy {
  const policy =
    retry instanceof RetryPolicy ? retry : new RetryPolicy(retry ?? DEFAULT_HTTP_EDGE_CONFIG.retry);
  if (policy.immediate !== 0) {
    throw new ConfigError(
      'retry.immediate',
      `must be 0 on the HTTP edge (a handler's response cannot be written twice), got ${policy.immediate}`,
    );
  }
  return policy;
}

function resolveStoredHeaders(names: readonly string[] | undefined): ReadonlySet<string> {
  const list = names ?? DEFAULT_STORED_HEADERS;
  if (!Array.isArray(list)) throw new ConfigError('storedHeaders', 'must be an array of header names');
  for (const name of list) {
    if (typeof name !== 'string' || !/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) {
      throw new ConfigError('storedHeaders', `${JSON.stringify(name)} is not a lower-case header name`);
    }
    if (FRAMING_HEADERS.includes(name)) {
      throw new ConfigError('storedHeaders', `'${name}' is written anew for every answer; leave it out`);
    }
  }
  return new Set(list);
}

function resolveWait(inFlight: HttpInFlight | undefined): number {
  const chosen = inFlight ?? DEFAULT_HTTP_EDGE_CONFIG.inFlight;
  if (chosen === 'reject') return 0;
  if (typeof chosen === 'object' && (chosen as unknown) !== null && 'wait' in chosen) {
    return parseDuration(chosen.wait, 'inFlight.wait');
  }
  throw new ConfigError('inFlight', `expected 'reject' or { wait: '10s' }, got ${JSON.stringify(chosen)}`);
}

/** Checks an edge's configuration at start-up. */
export function resolveHttpEdgeConfig<Tx>(config: HttpEdgeConfig<Tx>): ResolvedHttpEdgeConfig {
  requireFunction(
    config.principal,
    'principal',
    "name who sends the request (user, tenant, API client) so that two clients' keys never meet; `() => ''` shares one key space between all clients",
  );
  const key = config.key ?? IDEMPOTENCY_KEY_SOURCE;
  requireFunction(key, 'key', 'a function of the request that returns its key or undefined');
  if (config.verify !== undefined) requireFunction(config.verify, 'verify', 'throw to refuse a request');
  const scope = config.scope ?? ((request: HttpRequest) => request.route ?? request.path);
  requireFunction(scope, 'scope', 'a function of the request that returns its route');
  const fingerprint = config.fingerprint ?? true;
  if (typeof fingerprint !== 'boolean' && typeof fingerprint !== 'function') {
    throw new ConfigError('fingerprint', 'expected true, false or a function of the request');
  }
  const required = config.required ?? DEFAULT_HTTP_EDGE_CONFIG.required;
  if (typeof required !== 'boolean') throw new ConfigError('required', 'expected true or false');
  return Object.freeze({
    group: validateGroup(config.group ?? DEFAULT_HTTP_EDGE_CONFIG.group),
    principal: config.principal,
    key,
    required,
    verify: config.verify,
    scope,
    fingerprint,
    retry: resolveRetry(config.retry),
    waitMs: resolveWait(config.inFlight),
    storedHeaders: resolveStoredHeaders(config.storedHeaders),
    maxBodyBytes: byteLimit(
      config.maxBodyBytes,
      'maxBodyBytes',
      DEFAULT_HTTP_EDGE_CONFIG.maxBodyBytes,
      Number.MAX_SAFE_INTEGER,
    ),
    maxResponseBytes: byteLimit(
      config.maxResponseBytes,
      'maxResponseBytes',
      DEFAULT_HTTP_EDGE_CONFIG.maxResponseBytes,
      MAX_STORED_RESPONSE_BYTES,
    ),
  });
}
