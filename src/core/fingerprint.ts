import { hash } from 'node:crypto';
import type { Envelope } from './envelope.js';

/**
 * How a payload fingerprint is taken: `true` (default) hashes the body with SHA-256; a function
 * may hash only the fields that define the event (leaving out timestamps a producer retry changes);
 * `false` turns conflict detection off.
 */
export type FingerprintSource = boolean | ((envelope: Envelope, message: unknown) => string | Uint8Array);

export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

/** The fingerprint recorded with a claim, or `null` when fingerprints are off. */
export function fingerprint(source: FingerprintSource, envelope: Envelope, message: unknown): string | null {
  if (source === false) return null;
  if (source === true) return sha256Hex(envelope.body);
  return sha256Hex(source(envelope, message));
}
