/** FNV-1a, 32 bits: a stable hash of an ordering key, the same in every process and version. */
export function stableHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** The partition of `count` a key belongs to: `stableHash(key) mod count`. */
export function partitionOf(key: string, count: number): number {
  return stableHash(key) % count;
}
