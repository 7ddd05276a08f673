import { createHmac } from 'node:crypto';
import { type HttpRequest, type SignedWebhookPreset, webhookPresets } from 'oncemq/http';

/** What a test sends: the delivery's id and event, when it was signed, and its body. */
export interface Delivery {
  readonly id: string;
  /** Seconds since the epoch. */
  readonly timestamp: number;
  /** The raw body; for Stripe it must hold the id as the event's `id`. */
  readonly body: string | Uint8Array;
}

/**
 * One sender as the tests play it: its preset, two secrets (current and old, for rotation) and how it
 * signs a delivery, computed here with node:crypto from the sender's docs, apart from the code under test.
 */
export interface Sender {
  readonly name: string;
  readonly preset: SignedWebhookPreset;
  readonly secret: string;
  readonly oldSecret: string;
  /** The header that carries the signature(s). */
  readonly signatureHeader: string;
  /** Whether the scheme signs a timestamp (and so refuses a stale one). */
  readonly timestamped: boolean;
  /** The body of an event with this id (the key of the delivery). */
  body(id: string): string;
  /** The headers the sender sends for `delivery` signed with `secret`. */
  headers(delivery: Delivery, secret: string): Record<string, string>;
}

const hmac = (key: string | Buffer, ...parts: (string | Uint8Array)[]): Buffer => {
  const mac = createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
};

/** The key bytes of a `whsec_` secret. */
const whsecKey = (secret: string): Buffer => Buffer.from(secret.replace(/^whsec_/, ''), 'base64');

export const stripe: Sender = {
  name: 'stripe',
  preset: webhookPresets.stripe,
  secret: 'whsec_test_current0000000000000000',
  oldSecret: 'whsec_test_previous000000000000000',
  signatureHeader: 'stripe-signature',
  timestamped: true,
  body: (id) =>
    JSON.stringify({ id, object: 'event', type: 'invoice.paid', data: { object: { amount: 1200 } } }),
  headers: ({ timestamp, body }, secret) => ({
    'stripe-signature': `t=${timestamp},v1=${hmac(secret, `${timestamp}.`, body).toString('hex')}`,
  }),
};

export const github: Sender = {
  name: 'github',
  preset: webhookPresets.github,
  secret: "It's a Secret to Everybody",
  oldSecret: 'the secret before',
  signatureHeader: 'x-hub-signature-256',
  timestamped: false,
  body: (id) => JSON.stringify({ action: 'opened', issue: { number: 1, title: id } }),
  headers: ({ id, body }, secret) => ({
    'x-github-delivery': id,
    'x-github-event': 'issues',
    'x-hub-signature-256': `sha256=${hmac(secret, body).toString('hex')}`,
  }),
};

export const standardWebhooks: Sender = {
  name: 'standard-webhooks',
  preset: webhookPresets.standardWebhooks,
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  oldSecret: 'whsec_b2xkIHNlY3JldCBmb3Igcm90YXRpb24h',
  signatureHeader: 'webhook-signature',
  timestamped: true,
  body: (id) => JSON.stringify({ type: 'contact.created', data: { id } }),
  headers: ({ id, timestamp, body }, secret) => ({
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': `v1,${hmac(whsecKey(secret), `${id}.${timestamp}.`, body).toString('base64')}`,
  }),
};

export const shopify: Sender = {
  name: 'shopify',
  preset: webhookPresets.shopify,
  secret: 'shpss_current_client_secret',
  oldSecret: 'shpss_previous_client_secret',
  signatureHeader: 'x-shopify-hmac-sha256',
  timestamped: false,
  body: (id) => JSON.stringify({ id: 450789469, name: `#${id}` }),
  headers: ({ id, body }, secret) => ({
    'x-shopify-webhook-id': id,
    'x-shopify-topic': 'orders/create',
    'x-shopify-hmac-sha256': hmac(secret, body).toString('base64'),
  }),
};

export const SENDERS: readonly Sender[] = [stripe, github, standardWebhooks, shopify];

/** A request as an adapter hands it over: lower-case header names, the body as bytes. */
export function httpRequest(headers: Record<string, string>, body: string | Uint8Array): HttpRequest {
  return {
    method: 'POST',
    path: '/webhooks',
    url: '/webhooks',
    headers: Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value])),
    body: typeof body === 'string' ? Buffer.from(body, 'utf8') : body,
  };
}

/** A delivery of `sender` with id `id` signed at `timestamp` with `secret`, as a request. */
export function signedRequest(
  sender: Sender,
  id: string,
  timestamp: number,
  secret = sender.secret,
): HttpRequest {
  const body = sender.body(id);
  return httpRequest(sender.headers({ id, timestamp, body }, secret), body);
}
