/**
 * The HTTP edge: requests with an `Idempotency-Key` (IETF draft semantics) claimed in the same ledger
 * as messages, the handler run once per key, principal and route — its database writes through
 * `ctx.tx` committed with the claim and the stored response — and the response replayed byte for
 * byte to later requests with the key. One core (`createHttpEdge`), thin adapters for Express,
 * Fastify, `node:http` and fetch-style handlers (Hono, route handlers). See docs/http.md. Webhook
 * presets (`webhookPresets.github`, …) give the edge a sender's delivery id as `key` and its signature
 * check as `verify`: docs/webhooks.md.
 *
 * @module oncemq/http
 */
export { createHttpEdge, HttpAttemptError } from './http/http-edge.js';
export type { HttpEdge, HttpRun } from './http/http-edge.js';
export { DEFAULT_HTTP_EDGE_CONFIG } from './http/http-edge-config.js';
export type {
  HttpEdgeConfig,
  HttpFingerprint,
  HttpInFlight,
  HttpPrincipal,
} from './http/http-edge-config.js';
export type { HttpKeySource, HttpRequest, HttpVerifier } from './http/http-request.js';
export {
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_STORED_HEADERS,
  FRAMING_HEADERS,
  MAX_STORED_RESPONSE_BYTES,
  REPLAYED_HEADER,
} from './http/http-response.js';
export type { HttpProblemCode, HttpResponse } from './http/http-response.js';
export {
  headerKey,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENCY_KEY_SOURCE,
  InvalidIdempotencyKeyError,
  MAX_IDEMPOTENCY_KEY_LENGTH,
} from './http/idempotency-key.js';
export { httpContext } from './http/http-context.js';
export type { HttpContext } from './http/http-context.js';
export { expressIdempotency, keepRawBody } from './http/express-adapter.js';
export type { ExpressMiddleware, ExpressNext, ExpressRequestLike } from './http/express-adapter.js';
export { fastifyIdempotency } from './http/fastify-adapter.js';
export type {
  FastifyIdempotencyHooks,
  FastifyReplyLike,
  FastifyRequestLike,
} from './http/fastify-adapter.js';
export { nodeIdempotency } from './http/node-adapter.js';
export type { NodeListener } from './http/node-adapter.js';
export type { IncomingMessageLike, ServerResponseLike } from './http/node-message.js';
export { fetchIdempotency } from './http/fetch-adapter.js';
export type { FetchHandler, FetchIdempotencyOptions } from './http/fetch-adapter.js';
export {
  DEFAULT_WEBHOOK_TOLERANCE,
  hmacVerifier,
  jsonBodyKey,
  webhookHeaderKey,
  webhookPresets,
  WebhookSignatureError,
} from './http/webhook-presets.js';
export type {
  HmacScheme,
  SignatureReading,
  SignedWebhookPreset,
  WebhookPreset,
  WebhookPresets,
  WebhookSecret,
  WebhookSecrets,
  WebhookSignatureReason,
  WebhookVerifierFactory,
  WebhookVerifyOptions,
} from './http/webhook-presets.js';
