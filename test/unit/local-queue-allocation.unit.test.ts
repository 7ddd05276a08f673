import { describe, expect, it } from 'vitest';
import { roundRobinSelector } from 'oncemq/local';
import { allocateQueues, stableHash } from '../support/internal.js';

const queues = Array.from({ length: 5 }, (_, queueId) => ({ topic: 't', queueId }));

describe('queue allocation', () => {
  it('gives every queue to exactly one member, evenly, the first members one more', () => {
    const members = ['m3', 'm1', 'm2'];
    const shares = members.map((member) => allocateQueues(queues, members, member).map((q) => q.queueId));
    expect(shares).toEqual([[4], [0, 1], [2, 3]]);
  });

  it('gives nothing to a member missing from the view, and everything to a lone member', () => {
    expect(allocateQueues(queues, ['a'], 'b')).toEqual([]);
    expect(allocateQueues(queues, ['a'], 'a')).toHaveLength(5);
  });

  it('selects queues round robin per topic, and by a stable hash of the ordering key', () => {
    const select = roundRobinSelector();
    expect([select('t', 4, undefined), select('t', 4, undefined), select('u', 4, undefined)]).toEqual([
      0, 1, 0,
    ]);
    expect(select('t', 4, 'order-1')).toBe(stableHash('order-1') % 4);
    expect(stableHash('order-1')).toBe(stableHash('order-1'));
  });
});
