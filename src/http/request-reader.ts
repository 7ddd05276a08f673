import { randomUUID } from 'node:crypto';
import { errorText } from '../core/errors.js';
import { escapeKeyPart } from '../core/key.js';
import type { Logger } from '../core/logger.js';
import type { ResolvedHttpEdgeConfig } from './http-edge-config.js';
import type { HttpRequest } from './http-request.js';
import { problemResponse, type HttpResponse } from './http-response.js';
import { idempotencyKeyProblem, InvalidIdempotencyKeyError } from './idempotency-key.js';

/** What a request claims with: its ledger key's parts and its fingerprint. */
export interface ReadRequest {
  /** The ledger key before normalization: route, principal and client key, each escaped, joined by `:`. */
  readonly key: string;
  /** The principal the key is scoped by (`''` for an anonymous client). */
  readonly principal: string;
  /** The client's key as it sent it. */
  readonly idempotencyKey: string;
  /** What the pipeline hashes into the fingerprint, or null without one. */
  readonly print: string | Uint8Array | null;
}

const encoder = new TextEncoder();

/** The default fingerprint: method, path and body. */
function requestPrint(request: HttpRequest): Uint8Array {
  const head = encoder.encode(`${request.method} ${request.path}\n`);
  const print = new Uint8Array(head.byteLength + request.body.byteLength);
  print.set(head, 0);
  print.set(request.body, head.byteLength);
  return print;
}

/**
 * Reads a request before anything is claimed: its body's size, `verify`, the key, the principal, the
 * route and the fingerprint — or the answer that refuses it (413, 401, 400), as the pipeline's
 * delivery reader does for a message. A user function's throw is answered, never thrown on; a
 * principal or scope function returning something other than text is a programming error (thrown).
 */
export async function readHttpRequest(
  config: ResolvedHttpEdgeConfig,
  logger: Logger,
  request: HttpRequest,
): Promise<ReadRequest | HttpResponse> {
  if (request.body.byteLength > config.maxBodyBytes) {
    return problemResponse(
      413,
      'body-too-large',
      `the request body is larger than ${config.maxBodyBytes} bytes`,
    );
  }
  if (config.verify !== undefined) {
    try {
      await config.verify(request);
    } catch (error) {
      logger.debug('oncemq: HTTP request refused by verify', { path: request.path, error: errorText(error) });
      return problemResponse(401, 'unverified', 'the request could not be verified');
    }
  }
  let idempotencyKey: string | undefined;
  try {
    idempotencyKey = config.key(request);
  } catch (error) {
    const why = error instanceof InvalidIdempotencyKeyError ? error.message : 'the key could not be read';
    return problemResponse(400, 'invalid-key', why);
  }
  if (idempotencyKey === undefined) {
    if (config.required)
      return problemResponse(400, 'missing-key', 'this request needs an Idempotency-Key header');
    idempotencyKey = `once-${randomUUID()}`;
  }
  const problem =
    typeof idempotencyKey === 'string' ? idempotencyKeyProblem(idempotencyKey) : 'the key is not text';
  if (problem !== undefined) return problemResponse(400, 'invalid-key', problem);
  let principal: string | undefined;
  try {
    principal = await config.principal(request);
  } catch (error) {
    logger.debug('oncemq: HTTP request refused by principal', {
      path: request.path,
      error: errorText(error),
    });
    return problemResponse(401, 'unverified', 'the client could not be identified');
  }
  if (principal !== undefined && typeof principal !== 'string') {
    throw new TypeError(`principal() must return a string or undefined, got ${typeof principal}`);
  }
  const scope = config.scope(request);
  if (typeof scope !== 'string') throw new TypeError(`scope() must return a string, got ${typeof scope}`);
  let print: string | Uint8Array | null = null;
  if (config.fingerprint === true) print = requestPrint(request);
  else if (config.fingerprint !== false) {
    try {
      print = config.fingerprint(request);
    } catch (error) {
      return problemResponse(
        400,
        'malformed',
        `the request's fingerprint could not be taken: ${errorText(error)}`,
      );
    }
  }
  principal ??= '';
  const key = [scope, principal, idempotencyKey].map(escapeKeyPart).join(':');
  return { key, principal, idempotencyKey, print };
}
