import { randomUUID } from 'node:crypto';

/** Drawn once per process (and per worker thread: each loads its own copy of this module). */
const PROCESS_TOKEN = randomUUID();
let issued = 0;

/**
 * A claim's owner token: this process's random UUID and a counter, `<uuid>.<n>` in base 36. Unique
 * across processes (the UUID) and within one (the counter never repeats), which is all an owner check
 * needs; a fresh `randomUUID()` per claim costs a random draw and about 600 bytes of garbage. At most
 * 48 characters (36 + 1 + 11 for 2^53 in base 36), inside `MAX_OWNER_LENGTH` (64).
 */
export function ownerToken(): string {
  issued += 1;
  return `${PROCESS_TOKEN}.${issued.toString(36)}`;
}
