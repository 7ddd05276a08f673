import { TransportUnavailableError } from '../../core/errors.js';

/**
 * Replies of the stream commands, read whatever the client and protocol made of them: RESP2 arrays,
 * RESP3 maps as plain objects (node-redis), as `Map`s (a node-redis type mapping) or as flat
 * `[key, value, …]` arrays (ioredis), bulk strings as text or bytes.
 */

/** One stream entry as read: its id and fields (`null` when the entry was deleted while pending). */
export interface RawEntry {
  readonly id: string;
  readonly fields: ReadonlyMap<string, Uint8Array> | null;
  /**
   * Fields the entry holds more than once with different values (`XADD` allows it), each with every
   * value in entry order (`fields` has the last); absent when none.
   */
  readonly repeated?: ReadonlyMap<string, readonly Uint8Array[]> | undefined;
}

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean =>
  a.byteLength === b.byteLength && a.every((byte, i) => byte === b[i]);

const encoder = new TextEncoder();

function unexpected(what: string, reply: unknown): TransportUnavailableError {
  let shown: string;
  try {
    // undefined for a function or a symbol, whatever the types say: then the catch below
    shown = JSON.stringify(reply).slice(0, 120);
  } catch {
    shown = typeof reply;
  }
  return new TransportUnavailableError(`unexpected Redis reply to ${what}: ${shown}`);
}

/** A bulk string as text (`null` for a nil reply). */
export function replyText(reply: unknown): string | null {
  if (reply === null || reply === undefined) return null;
  if (typeof reply === 'string') return reply;
  if (typeof reply === 'number') return String(reply);
  if (reply instanceof Uint8Array) return Buffer.from(reply).toString('utf8');
  throw unexpected('a text reply', reply);
}

/** A bulk string as bytes. */
export function replyBytes(reply: unknown): Uint8Array {
  if (reply instanceof Uint8Array) return reply;
  if (typeof reply === 'string') return encoder.encode(reply);
  throw unexpected('a bytes reply', reply);
}

/** An integer reply. */
export function replyNumber(reply: unknown): number {
  const value = typeof reply === 'number' ? reply : Number(replyText(reply));
  if (!Number.isFinite(value)) throw unexpected('an integer reply', reply);
  return value;
}

function array(reply: unknown, what: string): readonly unknown[] {
  if (!Array.isArray(reply)) throw unexpected(what, reply);
  return reply;
}

/** `[id, [field, value, …]]` entries (XRANGE, XREADGROUP, XAUTOCLAIM). */
export function parseEntries(reply: unknown): RawEntry[] {
  if (reply === null || reply === undefined) return [];
  return array(reply, 'a list of entries').map((item) => {
    const [id, flat] = array(item, 'an entry');
    const text = replyText(id);
    if (text === null) throw unexpected('an entry id', item);
    if (flat === null || flat === undefined) return { id: text, fields: null };
    const pairs = array(flat, 'the fields of an entry');
    const fields = new Map<string, Uint8Array>();
    let repeated: Map<string, Uint8Array[]> | undefined;
    for (let i = 0; i + 1 < pairs.length; i += 2) {
      const name = replyText(pairs[i]) ?? '';
      const value = replyBytes(pairs[i + 1]);
      const earlier = fields.get(name);
      if (earlier !== undefined) {
        const values = repeated?.get(name);
        if (values !== undefined) values.push(value);
        else if (!sameBytes(earlier, value)) (repeated ??= new Map()).set(name, [earlier, value]);
      }
      fields.set(name, value);
    }
    return repeated === undefined ? { id: text, fields } : { id: text, fields, repeated };
  });
}

/** A stream key → entries reply of XREADGROUP, in any of its shapes; `null` (nothing came) is empty. */
export function parseStreams(reply: unknown): Map<string, RawEntry[]> {
  const streams = new Map<string, RawEntry[]>();
  if (reply === null || reply === undefined) return streams;
  if (reply instanceof Map) {
    for (const [key, entries] of reply) streams.set(replyText(key) ?? '', parseEntries(entries));
    return streams;
  }
  if (!Array.isArray(reply)) {
    if (typeof reply !== 'object') throw unexpected('XREADGROUP', reply);
    for (const [key, entries] of Object.entries(reply)) streams.set(key, parseEntries(entries));
    return streams;
  }
  if (reply.length === 0) return streams;
  if (Array.isArray(reply[0])) {
    // RESP2: [[key, entries], …]
    for (const pair of reply) {
      const [key, entries] = array(pair, 'a stream of XREADGROUP');
      streams.set(replyText(key) ?? '', parseEntries(entries));
    }
    return streams;
  }
  // A RESP3 map flattened: [key, entries, key, entries, …]
  for (let i = 0; i + 1 < reply.length; i += 2) {
    streams.set(replyText(reply[i]) ?? '', parseEntries(reply[i + 1]));
  }
  return streams;
}

/** XAUTOCLAIM's `[next cursor, entries, deleted ids]`. */
export function parseAutoClaim(reply: unknown): { next: string; entries: RawEntry[]; deleted: string[] } {
  const [next, entries, deleted] = array(reply, 'XAUTOCLAIM');
  return {
    next: replyText(next) ?? '0-0',
    entries: parseEntries(entries),
    deleted:
      deleted === undefined || deleted === null
        ? []
        : array(deleted, 'XAUTOCLAIM deleted ids').map((id) => replyText(id) ?? ''),
  };
}

/** The extended XPENDING reply as entry id → delivery count. */
export function parsePendingCounts(reply: unknown): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of array(reply, 'XPENDING')) {
    const [id, , , count] = array(item, 'a pending entry');
    counts.set(replyText(id) ?? '', replyNumber(count));
  }
  return counts;
}
