import { hmacVerifier, type WebhookSecrets, type WebhookVerifyOptions } from './hmac-verifier.js';
import type { HttpKeySource, HttpVerifier } from './http-request.js';
import { webhookHeaderKey, jsonBodyKey } from './webhook-keys.js';
import { githubScheme, shopifyScheme, standardWebhooksScheme, stripeScheme } from './webhook-schemes.js';

export {
  DEFAULT_WEBHOOK_TOLERANCE,
  hmacVerifier,
  type HmacScheme,
  type SignatureReading,
  type WebhookSecret,
  type WebhookSecrets,
  type WebhookVerifyOptions,
} from './hmac-verifier.js';
export { webhookHeaderKey, jsonBodyKey } from './webhook-keys.js';
export { WebhookSignatureError, type WebhookSignatureReason } from './webhook-signature-error.js';

/**
 * Makes a sender's verifier from its signing secret(s), at start-up: a secret or an option that cannot
 * work throws ConfigError there, not at the first request.
 */
export type WebhookVerifierFactory = (
  secrets: WebhookSecrets,
  options?: WebhookVerifyOptions,
) => HttpVerifier;

/**
 * What the HTTP middleware needs to know about one webhook sender, as data: where its delivery id is
 * (the business key, the same on every retry of one event) and how its requests are signed. The core
 * treats every preset alike; write one for any sender the same way.
 */
export interface WebhookPreset {
  /** A short name, used in errors and logs (`stripe`, `github`). */
  readonly name: string;
  /** Reads the delivery's business key; `undefined` when the request carries none. */
  readonly key: HttpKeySource;
  /** Makes the signature check that runs before the claim; absent for a sender that signs nothing. */
  readonly verify?: WebhookVerifierFactory;
  /** The sender's public documentation of its delivery id and signature. */
  readonly docs: string;
}

/** A preset whose sender signs its requests: {@link WebhookPreset} with `verify`. */
export interface SignedWebhookPreset extends WebhookPreset {
  /** Makes the signature check that runs before the claim. */
  readonly verify: WebhookVerifierFactory;
}

/** The presets of the senders oncemq knows; see docs/webhooks.md for each one's key, scheme and tolerance. */
export interface WebhookPresets {
  /** Stripe: the event's `id` in the JSON body; `Stripe-Signature` (`t=`, `v1=`), tolerance 5 minutes. */
  readonly stripe: SignedWebhookPreset;
  /** GitHub: `X-GitHub-Delivery`; `X-Hub-Signature-256` (`sha256=` hex), no timestamp. */
  readonly github: SignedWebhookPreset;
  /** Standard Webhooks: `webhook-id`; `webhook-signature` (`v1,` base64) over id, timestamp and body, tolerance 5 minutes. */
  readonly standardWebhooks: SignedWebhookPreset;
  /** Shopify: `X-Shopify-Webhook-Id`; `X-Shopify-Hmac-Sha256` (base64), no timestamp. */
  readonly shopify: SignedWebhookPreset;
}

/**
 * Presets for common webhook senders: each names where the sender puts its delivery id and makes
 * the signature check of its scheme. Use them as
 * `{ key: webhookPresets.github.key, verify: webhookPresets.github.verify(secret) }`.
 */
export const webhookPresets: WebhookPresets = Object.freeze({
  stripe: Object.freeze({
    name: 'stripe',
    // The Event object's `id` (evt_…); a retried delivery sends the same event.
    key: jsonBodyKey('id'),
    verify: hmacVerifier(stripeScheme),
    docs: 'https://docs.stripe.com/webhooks/signature',
  }),
  github: Object.freeze({
    name: 'github',
    // "If you request a redelivery, the X-GitHub-Delivery header will be the same as in the original
    // delivery." https://docs.github.com/en/webhooks/using-webhooks/best-practices-for-using-webhooks
    key: webhookHeaderKey('x-github-delivery'),
    verify: hmacVerifier(githubScheme),
    docs: 'https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries',
  }),
  standardWebhooks: Object.freeze({
    name: 'standard-webhooks',
    // "The unique identifier ... remains the same no matter how many times a webhook that has failed is
    // retried. The ID is often used as an idempotency key." (the spec, "Webhook metadata")
    key: webhookHeaderKey('webhook-id'),
    verify: hmacVerifier(standardWebhooksScheme),
    docs: 'https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md',
  }),
  shopify: Object.freeze({
    name: 'shopify',
    // The delivery id Shopify's guide names for detecting duplicates (docs/webhooks.md on X-Shopify-Event-Id).
    key: webhookHeaderKey('x-shopify-webhook-id'),
    verify: hmacVerifier(shopifyScheme),
    docs: 'https://shopify.dev/docs/apps/build/webhooks/verify-deliveries',
  }),
});
