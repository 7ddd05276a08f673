import { STATUS_CODES } from 'node:http';
import { MAX_RESULT_BYTES } from '../ledger/claim-request.js';

/** A response as the edge sees it: what a handler answered, a replay, or the edge's own answer. */
export interface HttpResponse {
  /** The status code. */
  readonly status: number;
  /** Headers by lower-case name; a header sent several times (`set-cookie`) has an array. */
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  /** The body's bytes, exactly as sent. */
  readonly body: Uint8Array;
}

/** Header on a replayed response: the request was answered from the stored response, the handler did not run. */
export const REPLAYED_HEADER = 'idempotent-replayed';

/**
 * The headers stored with a response and replayed with it, by default: those that say what the body
 * is and where the created resource lives. Per-client headers (`set-cookie`) and framing headers
 * (`content-length`, `transfer-encoding`, `date`) are left out; the framework writes framing anew.
 */
export const DEFAULT_STORED_HEADERS: readonly string[] = Object.freeze([
  'content-type',
  'content-encoding',
  'content-language',
  'content-disposition',
  'content-location',
  'location',
  'etag',
  'last-modified',
  'cache-control',
  'vary',
  'link',
]);

/** Headers a stored response never keeps: the framework frames each answer itself. */
export const FRAMING_HEADERS: readonly string[] = Object.freeze([
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'date',
]);

/** Largest body a response may have to be stored by default: 512 KiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 512 * 1024;

/**
 * Largest `maxResponseBytes` accepted: 720 KiB, whose base64 (960 KiB) leaves room for the headers
 * under the ledger's 1 MiB limit on a stored result.
 */
export const MAX_STORED_RESPONSE_BYTES = 720 * 1024;

/** The version of the stored form, first field of every stored response. */
const STORED_VERSION = 1;

interface StoredForm {
  readonly v: number;
  readonly status: number;
  readonly headers: readonly (readonly [string, string])[];
  readonly text?: string;
  readonly base64?: string;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** A body as text when it is UTF-8 (readable in `oncemq ledger show`, and smaller), else undefined. */
function asText(body: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(body);
  } catch {
    return undefined;
  }
}

/**
 * A response in the form the ledger stores: JSON of the status, the `stored` headers in order and
 * the body, as text when it is UTF-8 (JSON escapes keep every byte) else as base64. Decoding it gives
 * the same status, headers and body bytes. `undefined` when the form is over the ledger's limit.
 */
export function encodeStoredResponse(
  response: HttpResponse,
  stored: ReadonlySet<string>,
): string | undefined {
  const headers: (readonly [string, string])[] = [];
  for (const [name, value] of Object.entries(response.headers)) {
    if (!stored.has(name)) continue;
    for (const one of typeof value === 'string' ? [value] : value) headers.push([name, one]);
  }
  const base = { v: STORED_VERSION, status: response.status, headers };
  const text = asText(response.body);
  let form = JSON.stringify(text === undefined ? base : { ...base, text });
  // Escapes can make text longer than its base64 (a body of control characters): keep the shorter.
  if (text !== undefined && form.length > (response.body.byteLength * 4) / 3 + 512) {
    const base64 = JSON.stringify({ ...base, base64: Buffer.from(response.body).toString('base64') });
    if (base64.length < form.length) form = base64;
  } else if (text === undefined) {
    form = JSON.stringify({ ...base, base64: Buffer.from(response.body).toString('base64') });
  }
  return Buffer.byteLength(form, 'utf8') <= MAX_RESULT_BYTES ? form : undefined;
}

/** A stored response read back, or `undefined` when the text is not one (written by something else). */
export function decodeStoredResponse(stored: unknown): HttpResponse | undefined {
  if (typeof stored !== 'string') return undefined;
  let form: StoredForm;
  try {
    form = JSON.parse(stored) as StoredForm;
  } catch {
    return undefined;
  }
  if (form.v !== STORED_VERSION || !Number.isInteger(form.status) || !Array.isArray(form.headers)) {
    return undefined;
  }
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of form.headers as readonly (readonly [string, string])[]) {
    const had = headers[name];
    headers[name] = had === undefined ? value : [...(typeof had === 'string' ? [had] : had), value];
  }
  let body: Uint8Array;
  if (typeof form.text === 'string') body = encoder.encode(form.text);
  else if (typeof form.base64 === 'string') body = new Uint8Array(Buffer.from(form.base64, 'base64'));
  else return undefined;
  return { status: form.status, headers, body };
}

/** What kind of answer the edge gave on its own, in the `code` member of its problem body. */
export type HttpProblemCode =
  | 'unverified'
  | 'missing-key'
  | 'invalid-key'
  | 'body-too-large'
  | 'key-reused'
  | 'in-flight'
  | 'handler-failed'
  | 'response-too-large'
  | 'key-dead'
  | 'not-replayable'
  | 'unavailable'
  | 'malformed'
  | 'internal';

/**
 * One of the edge's own answers: an RFC 9457 problem (`application/problem+json`) with the status
 * phrase as its title, a `detail` sentence, and `code` saying which case it is.
 */
export function problemResponse(
  status: number,
  code: HttpProblemCode,
  detail: string,
  headers: Readonly<Record<string, string>> = {},
): HttpResponse {
  const body = JSON.stringify({
    type: 'about:blank',
    title: STATUS_CODES[status] ?? 'Error',
    status,
    detail,
    code,
  });
  return {
    status,
    headers: { ...headers, 'content-type': 'application/problem+json' },
    body: encoder.encode(body),
  };
}

/** The `Retry-After` value (whole seconds, at least 1) for a wait of `ms`. */
export function retryAfterSeconds(ms: number): string {
  return String(Math.max(1, Math.ceil(ms / 1000)));
}

/** `response` with `Retry-After` added, unless it has one. */
export function withRetryAfter(response: HttpResponse, ms: number): HttpResponse {
  if (response.headers['retry-after'] !== undefined) return response;
  return { ...response, headers: { ...response.headers, 'retry-after': retryAfterSeconds(ms) } };
}
