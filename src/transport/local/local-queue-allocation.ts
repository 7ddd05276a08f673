/** One queue of a topic. */
export interface QueueRef {
  /** The topic. */
  readonly topic: string;
  /** The queue's number within the topic, from 0. */
  readonly queueId: number;
}

/** Stable text form of a queue, `topic#id`. */
export function queueName(queue: QueueRef): string {
  return `${queue.topic}#${queue.queueId}`;
}

/**
 * RocketMQ's `AllocateMessageQueueAveragely`: queues and members are sorted, each member takes a
 * contiguous run of `floor(q / m)` queues and the first `q mod m` members one more. Every member
 * computes the same answer from the same view, so no coordinator is needed.
 */
export function allocateQueues(
  queues: readonly QueueRef[],
  members: readonly string[],
  member: string,
): QueueRef[] {
  const sortedMembers = [...members].sort();
  const index = sortedMembers.indexOf(member);
  if (index < 0 || queues.length === 0) return [];
  const sorted = [...queues].sort((a, b) =>
    a.topic === b.topic ? a.queueId - b.queueId : a.topic < b.topic ? -1 : 1,
  );
  const count = sortedMembers.length;
  const base = Math.floor(sorted.length / count);
  const extra = sorted.length % count;
  const size = base + (index < extra ? 1 : 0);
  const start = index * base + Math.min(index, extra);
  return sorted.slice(start, start + size);
}
