import { OncemqError } from '../core/errors.js';

/**
 * Why a webhook request was refused before it could claim its key:
 *
 * - `missing-signature` — the request carries no signature of the sender's scheme (no header, or no
 *   `v1` signature in it): an unsigned request.
 * - `malformed` — the signature headers are there but cannot be read (no timestamp, a timestamp that
 *   is not a whole number of seconds, a digest that is not hex or base64 of 32 bytes, a header sent
 *   twice): a broken or hostile request.
 * - `bad-signature` — well-formed signatures, none of which any of the configured secrets produces
 *   over the raw body: a forged or altered request, or a wrong secret.
 * - `stale-timestamp` — a genuine signature over a timestamp outside the tolerance: a late replay of
 *   a captured request, or a clock far off.
 */
export type WebhookSignatureReason = 'missing-signature' | 'malformed' | 'bad-signature' | 'stale-timestamp';

/**
 * A webhook request whose signature does not hold. Thrown by the verifiers of the webhook presets
 * before any key is claimed; the HTTP middleware answers it with 401 and nothing is recorded.
 * The message names the sender, the reason and the header at fault, never a secret or the digests.
 */
export class WebhookSignatureError extends OncemqError {
  /** Always `'WebhookSignatureError'`. */
  override name = 'WebhookSignatureError' as const;
  /** The sender whose scheme refused the request: a preset's `name` (`stripe`, `github`, …). */
  readonly sender: string;
  /** Why the request was refused; stable across releases, for a `switch` or a metric label. */
  readonly reason: WebhookSignatureReason;

  constructor(sender: string, reason: WebhookSignatureReason, detail: string, options?: ErrorOptions) {
    super('webhook-signature', `${sender} webhook refused (${reason}): ${detail}`, options);
    this.sender = sender;
    this.reason = reason;
  }
}
