/** Chooses the queue of a topic a message is stored in. */
export type QueueSelector = (topic: string, queues: number, orderingKey: string | undefined) => number;

export { stableHash } from '../partitions.js';
import { stableHash } from '../partitions.js';

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
