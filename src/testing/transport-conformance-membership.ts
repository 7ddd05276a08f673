import { expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import type { Subscription, Transport } from '../transport/transport.js';
import type { TransportCase } from './transport-conformance.js';
import { keyOf, outcomeFor } from './transport-conformance-fixture.js';

/** Members of one group subscribing together. */
const MEMBERS = 4;

/** Cases about joining a group: several members at once, each through its own transport where the factory can make peers. */
export function describeTransportMembershipCases(test: () => TransportCase): void {
  it('members of a new group subscribing at the same moment all join, and share the messages', async () => {
    const { under, transport, group, topic } = test();
    const peers: Transport[] = [];
    const joined: Subscription[] = [];
    try {
      for (let i = 1; i < MEMBERS; i++) if (under.peer !== undefined) peers.push(await under.peer());
      const delivered = new Map<string, number>();
      const processor = {
        process: (envelope: Envelope) => {
          const key = keyOf(envelope) ?? '';
          delivered.set(key, (delivered.get(key) ?? 0) + 1);
          return Promise.resolve(outcomeFor(envelope, 'ack', 0));
        },
      };
      // A fresh topic and group: every member finds what the group needs missing and makes it at once.
      const members = [transport, ...peers];
      while (members.length < MEMBERS) members.push(transport);
      const results = await Promise.allSettled(
        members.map(async (member) => {
          if (member === transport) return test().subscribeProcessor(group, processor);
          const subscription = await member.subscribe(group, [topic], processor);
          joined.push(subscription);
          return subscription;
        }),
      );
      const failures = results.flatMap((result) =>
        result.status === 'rejected' ? [String(result.reason as unknown)] : [],
      );
      expect(failures).toEqual([]);
      const keys = await test().publish(20, 'member');
      await test().waitFor(
        () => keys.every((key) => delivered.has(key)),
        'every message delivered to the group',
      );
      // At least once: a member joining may take over a queue before its offsets were committed.
      expect([...delivered.keys()].sort()).toEqual([...keys].sort());
    } finally {
      await Promise.all(joined.map((subscription) => subscription.close()));
      await Promise.all(peers.map((peer) => peer.close()));
    }
  });
}
