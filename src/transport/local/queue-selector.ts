/** Chooses the queue of a topic a message is stored in. */
export type QueueSelector = (topic: string, queues: number, orderingKey: string | undefined) => number;

/** FNV-1a, 32 bits: a stable hash of an ordering key, the same in every process and version. */
export function stableHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * The default selector: messages with an ordering key go to `hash(key) mod queues` (all of a key in
 * one queue), the others round robin per topic.
 */
export function roundRobinSelector(): QueueSelector {
  const next = new Map<string, number>();
  return (topic, queues, orderingKey) => {
    if (orderingKey !== undefined) return stableHash(orderingKey) % queues;
    const n = next.get(topic) ?? 0;
    next.set(topic, n + 1);
    return n % queues;
  };
}
