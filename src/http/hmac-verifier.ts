import { createHmac, timingSafeEqual } from 'node:crypto';
import { type Duration, formatDuration, parseDuration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import type { HttpRequest, HttpVerifier } from './http-request.js';
import { WebhookSignatureError } from './webhook-signature-error.js';

/**
 * A signing secret: text as the sender shows it (`whsec_…`, a GitHub webhook secret, a Shopify app's
 * client secret), or the key's raw bytes.
 */
export type WebhookSecret = string | Uint8Array;

/**
 * One secret, or several while a secret is rotated: a request signed with any of them is accepted.
 * List the new secret and the old one until the sender signs with the new one only, then drop the old.
 */
export type WebhookSecrets = WebhookSecret | readonly WebhookSecret[];

/** The tolerance of a timestamped scheme when none is given: 5 minutes, as Stripe's and Standard Webhooks' libraries. */
export const DEFAULT_WEBHOOK_TOLERANCE: Duration = '5m';

/** Per-verifier settings of a signature check. */
export interface WebhookVerifyOptions {
  /**
   * How far the signed timestamp may be from now, either way, before a genuine signature is refused as
   * `stale-timestamp`. Only for schemes that sign a timestamp (Stripe, Standard Webhooks); refused at
   * start-up for one that signs none (GitHub, Shopify).
   * @default DEFAULT_WEBHOOK_TOLERANCE ('5m')
   */
  readonly tolerance?: Duration;
  /**
   * The clock the timestamp is compared with, in milliseconds since the epoch.
   * @default Date.now
   */
  readonly now?: () => number;
}

/** What a scheme read from a request's headers: candidate signatures, or why there are none to check. */
export type SignatureReading =
  | {
      /** The signatures as sent (hex or base64 text, the scheme's prefixes removed). */
      readonly signatures: readonly string[];
      /** The signed timestamp as sent (seconds since the epoch), for a scheme that signs one. */
      readonly timestamp?: string;
    }
  | {
      /** Why the request carries nothing to check. */
      readonly refused: 'missing-signature' | 'malformed';
      /** What is missing or unreadable, naming the header. */
      readonly detail: string;
    };

/**
 * An HMAC-SHA256 signature scheme, described as data: where the signatures are, how they are
 * encoded, and which bytes are signed. {@link hmacVerifier} makes a verifier of it; the presets'
 * verifiers are such descriptions.
 */
export interface HmacScheme {
  /** Names the sender in errors: the preset's `name`. */
  readonly sender: string;
  /** Reads the candidate signatures (and the signed timestamp) from the request. */
  readonly read: (request: HttpRequest) => SignatureReading;
  /** How each signature is written: the 32 digest bytes as `hex` (64 digits) or `base64` (44 characters). */
  readonly encoding: 'hex' | 'base64';
  /** The signed content, in parts that are concatenated: text (UTF-8) and the raw body. */
  readonly signed: (request: HttpRequest, timestamp: string | undefined) => readonly (string | Uint8Array)[];
  /** Whether the sender signs a timestamp (read by `read`), which must then lie within the tolerance. */
  readonly timestamped: boolean;
  /**
   * How a text secret becomes the HMAC key: `text` — its UTF-8 bytes (Stripe, GitHub, Shopify);
   * `whsec` — base64 after an optional `whsec_` prefix (Standard Webhooks).
   */
  readonly secretFormat: 'text' | 'whsec';
}

/** Makes the HMAC key bytes of each configured secret; throws ConfigError for one that cannot work. */
function secretKeys(secrets: WebhookSecrets, format: HmacScheme['secretFormat'], field: string): Buffer[] {
  const list: readonly WebhookSecret[] =
    typeof secrets === 'string' || secrets instanceof Uint8Array ? [secrets] : secrets;
  if (list.length === 0)
    throw new ConfigError(field, 'no secret given; pass the signing secret (or several while rotating)');
  return list.map((secret, index) => {
    const at = list.length === 1 ? field : `${field}[${index}]`;
    if (secret instanceof Uint8Array) {
      if (secret.length === 0) throw new ConfigError(at, 'the secret is empty');
      return Buffer.from(secret);
    }
    if (typeof secret !== 'string' || secret === '')
      throw new ConfigError(at, 'the secret is empty or not text');
    if (secret.trim() !== secret) {
      throw new ConfigError(
        at,
        'the secret starts or ends with white space (a newline read from a file?); trim it, or pass its bytes as a Uint8Array if the white space belongs to it',
      );
    }
    if (format === 'text') return Buffer.from(secret, 'utf8');
    const base64 = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
    if (base64 === '' || !/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0) {
      throw new ConfigError(at, 'expected whsec_ followed by the base64 of the key, as the sender shows it');
    }
    return Buffer.from(base64, 'base64');
  });
}

const DIGEST = { hex: /^[0-9a-fA-F]{64}$/, base64: /^[A-Za-z0-9+/]{43}=$/ } as const;

/** The 32-byte digest a signature stands for, or `undefined` when it is no such digest. */
function digestOf(signature: string, encoding: HmacScheme['encoding']): Buffer | undefined {
  return DIGEST[encoding].test(signature) ? Buffer.from(signature, encoding) : undefined;
}

const TIMESTAMP = /^(?:0|[1-9][0-9]{0,11})$/;

const SECRET_FORMATS: readonly string[] = ['text', 'whsec'];

/** Refuses, at start-up, a scheme description the verifier could not follow. */
function checkScheme(scheme: HmacScheme): void {
  const field = (name: string): string => `scheme.${name}`;
  if (typeof scheme.sender !== 'string' || scheme.sender === '') {
    throw new ConfigError(field('sender'), "must name the sender (the preset's name)");
  }
  if (!Object.hasOwn(DIGEST, scheme.encoding))
    throw new ConfigError(field('encoding'), "must be 'hex' or 'base64'");
  if (!SECRET_FORMATS.includes(scheme.secretFormat)) {
    throw new ConfigError(field('secretFormat'), "must be 'text' or 'whsec'");
  }
  if (typeof scheme.read !== 'function' || typeof scheme.signed !== 'function') {
    throw new ConfigError(field('read'), 'read and signed must be functions of the request');
  }
}

/**
 * The verifier factory of an HMAC-SHA256 scheme: give it the secret(s) and options at start-up (a
 * secret or option that cannot work throws ConfigError there); the verifier it returns throws
 * {@link WebhookSignatureError} for a request none of the secrets signed, and returns for one they did.
 * Digests are compared with `crypto.timingSafeEqual`; the signature is checked before the timestamp,
 * so a `stale-timestamp` request is a genuine one that came late.
 */
export function hmacVerifier(
  scheme: HmacScheme,
): (secrets: WebhookSecrets, options?: WebhookVerifyOptions) => HttpVerifier {
  checkScheme(scheme);
  return (secrets, options = {}) => {
    const keys = secretKeys(secrets, scheme.secretFormat, `${scheme.sender}.secret`);
    if (!scheme.timestamped && options.tolerance !== undefined) {
      throw new ConfigError(
        `${scheme.sender}.tolerance`,
        `${scheme.sender} signs no timestamp, so no tolerance applies; remove it`,
      );
    }
    const toleranceMs = parseDuration(
      options.tolerance ?? DEFAULT_WEBHOOK_TOLERANCE,
      `${scheme.sender}.tolerance`,
    );
    if (toleranceMs <= 0) throw new ConfigError(`${scheme.sender}.tolerance`, 'must be longer than 0');
    const now = options.now ?? Date.now;
    const refuse = (reason: WebhookSignatureError['reason'], detail: string): WebhookSignatureError =>
      new WebhookSignatureError(scheme.sender, reason, detail);

    return (request) => {
      const reading = scheme.read(request);
      if ('refused' in reading) throw refuse(reading.refused, reading.detail);
      const { timestamp } = reading;
      if (scheme.timestamped && (timestamp === undefined || !TIMESTAMP.test(timestamp))) {
        throw refuse('malformed', 'the signed timestamp is missing or not a whole number of seconds');
      }
      const digests = reading.signatures.flatMap((signature) => digestOf(signature, scheme.encoding) ?? []);
      if (digests.length === 0) {
        throw refuse('malformed', `no signature is a SHA-256 digest in ${scheme.encoding}`);
      }
      const parts = scheme.signed(request, timestamp);
      const signed = keys.some((key) => {
        const hmac = createHmac('sha256', key);
        for (const part of parts) hmac.update(part);
        const expected = hmac.digest();
        return digests.some((digest) => timingSafeEqual(digest, expected));
      });
      if (!signed) throw refuse('bad-signature', 'no signature matches the body under any configured secret');
      if (scheme.timestamped) {
        const skewMs = Math.abs(now() - Number(timestamp) * 1000);
        // Written so that a clock answering NaN refuses rather than accepts.
        if (!(skewMs <= toleranceMs)) {
          throw refuse(
            'stale-timestamp',
            `the signed timestamp ${String(timestamp)} is ${formatDuration(Math.round(skewMs / 1000) * 1000)} from now, past the tolerance of ${formatDuration(toleranceMs)}`,
          );
        }
      }
    };
  };
}
