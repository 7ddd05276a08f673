import type { HmacScheme, SignatureReading } from './hmac-verifier.js';
import type { HttpRequest } from './http-request.js';

// The signature schemes of the senders with a preset, each read from the sender's public docs (the
// URL above each). Every scheme is HMAC-SHA256 over bytes that include the raw body, as received.

const missing = (header: string): SignatureReading => ({
  refused: 'missing-signature',
  detail: `no '${header}' header`,
});

const malformed = (detail: string): SignatureReading => ({ refused: 'malformed', detail });

/** A header's value, `undefined` when absent or empty. */
function header(request: HttpRequest, name: string): string | undefined {
  const value = request.headers[name];
  return value === '' ? undefined : value;
}

/**
 * Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, each `v1` an HMAC-SHA256 in hex of
 * `<t>.<raw body>` under the endpoint's signing secret (`whsec_…`, used as text); several `v1` while
 * Stripe rolls a secret; other schemes (`v0`) ignored. A `t` given twice (the header sent twice) or an
 * element that is not `name=value` is malformed.
 * https://docs.stripe.com/webhooks/signature — "Verify manually"
 */
export const stripeScheme: HmacScheme = {
  sender: 'stripe',
  encoding: 'hex',
  timestamped: true,
  secretFormat: 'text',
  read(request) {
    const value = header(request, 'stripe-signature');
    if (value === undefined) return missing('stripe-signature');
    let timestamp: string | undefined;
    const signatures: string[] = [];
    for (const element of value.split(',')) {
      const at = element.indexOf('=');
      if (at < 0) return malformed("'stripe-signature' holds an element that is not name=value");
      // Only the optional white space of a list (SP, HTAB) around a name, as in a header sent twice.
      const name = element.slice(0, at).replace(/^[ \t]+|[ \t]+$/g, '');
      const text = element.slice(at + 1);
      if (name === 't') {
        if (timestamp !== undefined) return malformed("'stripe-signature' holds two timestamps (t=)");
        timestamp = text;
      } else if (name === 'v1') {
        signatures.push(text);
      }
    }
    if (timestamp === undefined) return malformed("'stripe-signature' holds no timestamp (t=)");
    if (signatures.length === 0)
      return { refused: 'missing-signature', detail: "'stripe-signature' holds no v1 signature" };
    return { signatures, timestamp };
  },
  signed: (request, timestamp) => [`${String(timestamp)}.`, request.body],
};

/**
 * GitHub: `X-Hub-Signature-256: sha256=<hex>`, an HMAC-SHA256 in hex of the raw body under the
 * webhook's secret (text). No timestamp is signed (nor the delivery id).
 * https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
 */
export const githubScheme: HmacScheme = {
  sender: 'github',
  encoding: 'hex',
  timestamped: false,
  secretFormat: 'text',
  read(request) {
    const value = header(request, 'x-hub-signature-256');
    if (value === undefined) return missing('x-hub-signature-256');
    if (!value.startsWith('sha256=') || value.includes(',')) {
      return malformed("'x-hub-signature-256' is not one sha256=<hex digest>");
    }
    return { signatures: [value.slice('sha256='.length)] };
  },
  signed: (request) => [request.body],
};

/**
 * Shopify: `X-Shopify-Hmac-Sha256: <base64>`, an HMAC-SHA256 in base64 of the raw body under the app's
 * client secret (text). No timestamp is signed (nor the webhook id).
 * https://shopify.dev/docs/apps/build/webhooks/verify-deliveries
 */
export const shopifyScheme: HmacScheme = {
  sender: 'shopify',
  encoding: 'base64',
  timestamped: false,
  secretFormat: 'text',
  read(request) {
    const value = header(request, 'x-shopify-hmac-sha256');
    if (value === undefined) return missing('x-shopify-hmac-sha256');
    return { signatures: [value] };
  },
  signed: (request) => [request.body],
};

/**
 * Standard Webhooks: `webhook-signature: v1,<base64>[ v1,<base64>…]` (space-separated, several while a
 * secret is rotated; `v1a` asymmetric signatures are not checked here), each an HMAC-SHA256 in base64
 * of `<webhook-id>.<webhook-timestamp>.<raw body>` under the secret `whsec_<base64 key>`. The id and
 * the timestamp are signed, so neither can be changed without the secret.
 * https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md — "Signature scheme", "Verifying signatures"
 */
export const standardWebhooksScheme: HmacScheme = {
  sender: 'standard-webhooks',
  encoding: 'base64',
  timestamped: true,
  secretFormat: 'whsec',
  read(request) {
    const value = header(request, 'webhook-signature');
    if (value === undefined) return missing('webhook-signature');
    const id = header(request, 'webhook-id');
    if (id === undefined) return malformed("no 'webhook-id' header, which the signature covers");
    const timestamp = header(request, 'webhook-timestamp');
    if (timestamp === undefined)
      return malformed("no 'webhook-timestamp' header, which the signature covers");
    const signatures = value
      .split(' ')
      .flatMap((entry) => (entry.startsWith('v1,') ? [entry.slice('v1,'.length)] : []));
    if (signatures.length === 0)
      return { refused: 'missing-signature', detail: "'webhook-signature' holds no v1 signature" };
    return { signatures, timestamp };
  },
  signed: (request, timestamp) => [
    `${String(request.headers['webhook-id'])}.${String(timestamp)}.`,
    request.body,
  ],
};
