// A webhook preset for a sender oncemq has none for, made of the same parts as the built-in ones.
// docs/webhooks.md quotes the part between the markers.
import { webhookHeaderKey, hmacVerifier, type WebhookPreset } from 'oncemq/http';

// #region example
// Acme sends its delivery id, the same on every retry, in `Acme-Delivery`, and signs
// `<unix seconds>.<raw body>` with HMAC-SHA256: `Acme-Signature: <unix seconds>:<hex digest>`.
export const acmePreset = {
  name: 'acme',
  key: webhookHeaderKey('acme-delivery'),
  verify: hmacVerifier({
    sender: 'acme',
    encoding: 'hex',
    timestamped: true,
    secretFormat: 'text',
    read(request) {
      const value = request.headers['acme-signature'];
      if (value === undefined) return { refused: 'missing-signature', detail: "no 'acme-signature' header" };
      const [timestamp, signature, ...rest] = value.split(':');
      if (signature === undefined || rest.length > 0) {
        return { refused: 'malformed', detail: "'acme-signature' is not <timestamp>:<hex>" };
      }
      return { signatures: [signature], timestamp };
    },
    signed: (request, timestamp) => [`${String(timestamp)}.`, request.body],
  }),
  docs: 'https://docs.acme.example/webhooks#signatures',
} satisfies WebhookPreset;
// #endregion example
