// What the webhook presets' tests share: a fixed clock, the reason a verifier refuses a request with,
// a sender's verifier and a request with headers changed.
import {
  type HttpRequest,
  type HttpVerifier,
  WebhookSignatureError,
  type WebhookSignatureReason,
} from 'oncemq/http';
import type { Sender } from './webhook-senders.js';

/** The time the tests sign and verify at, in seconds. */
export const T = 1_700_000_000; // seconds
export const at = (seconds: number) => () => seconds * 1000;

/** The reason `verify` refused `request` with, or `'accepted'`. */
export async function outcome(
  verify: HttpVerifier,
  request: HttpRequest,
): Promise<WebhookSignatureReason | 'accepted'> {
  try {
    await verify(request);
    return 'accepted';
  } catch (error) {
    if (error instanceof WebhookSignatureError) return error.reason;
    throw error;
  }
}

export const verifierOf = (
  sender: Sender,
  secrets: string | readonly string[] = sender.secret,
  now = at(T),
): HttpVerifier => sender.preset.verify(secrets, sender.timestamped ? { now } : {});

export const withHeaders = (
  request: HttpRequest,
  headers: Record<string, string | undefined>,
): HttpRequest => ({
  ...request,
  headers: { ...request.headers, ...headers },
});
