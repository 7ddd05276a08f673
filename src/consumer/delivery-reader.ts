import type { Envelope } from '../core/envelope.js';
import { ConfigError, errorText, PermanentError } from '../core/errors.js';
import { fingerprint, type FingerprintSource } from '../core/fingerprint.js';
import { normalizeKey, type KeyExtractor } from '../core/key.js';
import type { ClaimRequest } from '../ledger/ledger.js';
import type { DeliveryTrace } from '../telemetry/delivery-trace.js';

/** How the body becomes the handler's message; a failure is a `malformed` dead letter. */
export type Decoder<T> = 'json' | 'text' | 'bytes' | ((envelope: Envelope) => T);

/** A delivery read into its key, message and claim request — or the permanent error that stops it. */
export type ReadDelivery<T> =
  | {
      readonly ok: true;
      readonly envelope: Envelope;
      readonly trace: DeliveryTrace;
      readonly key: string;
      readonly message: T;
      readonly request: ClaimRequest;
    }
  | {
      readonly ok: false;
      readonly envelope: Envelope;
      readonly trace: DeliveryTrace;
      /** The key, when it could be read before the failure. */
      readonly key: string | null;
      readonly error: PermanentError;
    };

/** A delivery that was read: it can be claimed. */
export type Readable<T> = Extract<ReadDelivery<T>, { ok: true }>;

const textDecoder = new TextDecoder('utf-8', { fatal: true });

export function compileDecoder<T>(decode: Decoder<T>): (envelope: Envelope) => T {
  switch (decode) {
    case 'json':
      return (envelope) => JSON.parse(textDecoder.decode(envelope.body)) as T;
    case 'text':
      return (envelope) => textDecoder.decode(envelope.body) as T;
    case 'bytes':
      return (envelope) => envelope.body as T;
    default:
      if (typeof decode !== 'function') {
        throw new ConfigError(
          'decode',
          `expected 'json', 'text', 'bytes' or a function, got ${JSON.stringify(decode)}`,
        );
      }
      return decode;
  }
}

/** A user function's failure as the permanent error it becomes (its own, when it threw one). */
function permanent(reason: string, what: string, error: unknown): PermanentError {
  if (error instanceof PermanentError) return error;
  return new PermanentError(reason, `${what}: ${errorText(error)}`, { cause: error });
}

/** The business key of a delivery, or the permanent error that stops it. */
function readKey<T>(config: ReaderConfig<T>, envelope: Envelope, message: unknown): string | PermanentError {
  try {
    return normalizeKey(config.key(envelope, message));
  } catch (error) {
    return permanent('invalid-key', 'cannot read the business key', error);
  }
}

/** What reading needs from the pipeline's configuration. */
export interface ReaderConfig<T> {
  readonly group: string;
  readonly key: KeyExtractor;
  readonly decode: (envelope: Envelope) => T;
  readonly fingerprint: FingerprintSource;
  readonly leaseMs: number;
}

/**
 * Reads a delivery: its business key (before the body when the key is in a header, so that a
 * message with a bad body is still dead-lettered under its key), its decoded message, its payload
 * fingerprint and the claim request. Whatever a user function throws becomes a permanent error
 * with a reason, never an exception out of here.
 */
export function readDelivery<T>(
  config: ReaderConfig<T>,
  envelope: Envelope,
  trace: DeliveryTrace,
): ReadDelivery<T> {
  let key = config.key.needsMessage ? null : readKey(config, envelope, undefined);
  if (key instanceof PermanentError) return { ok: false, envelope, trace, key: null, error: key };
  let message: T;
  try {
    message = config.decode(envelope);
  } catch (error) {
    return {
      ok: false,
      envelope,
      trace,
      key,
      error: permanent('malformed', 'cannot decode the body', error),
    };
  }
  key ??= readKey(config, envelope, message);
  if (key instanceof PermanentError) return { ok: false, envelope, trace, key: null, error: key };
  let print: string | null;
  try {
    print = fingerprint(config.fingerprint, envelope, message);
  } catch (error) {
    return {
      ok: false,
      envelope,
      trace,
      key,
      error: permanent('malformed', 'cannot fingerprint the payload', error),
    };
  }
  return {
    ok: true,
    envelope,
    trace,
    key,
    message,
    request: {
      group: config.group,
      key,
      fingerprint: print,
      brokerId: envelope.brokerId,
      topic: envelope.topic,
      leaseMs: config.leaseMs,
    },
  };
}
