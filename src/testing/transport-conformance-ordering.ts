import { expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import type { TransportCase } from './transport-conformance.js';
import { keyOf, outcomeFor, sleep } from './transport-conformance-fixture.js';
import { describeTransportPartitionCountCases } from './transport-conformance-partitions.js';

/**
 * Per-key ordered consumption (ordering capability); refused where the transport has no ordering. A
 * change of a group's partition count is refused, or drained on request.
 */
export function describeTransportOrderingCases(test: () => TransportCase): void {
  it('runs one key at a time in publish order, retries in place, and lets other keys pass a failing one', async (ctx) => {
    const { transport, topic, group } = test();
    if (!transport.capabilities.ordering) ctx.skip();
    const keys = ['k0', 'k1', 'k2', 'k3'];
    const per = 6;
    const seen = new Map<string, number[]>(keys.map((key) => [key, []]));
    const running = new Set<string>();
    const overlaps: string[] = [];
    const timeline: string[] = [];
    let done = 0;
    await test().subscribeProcessor(
      group,
      {
        process: async (envelope: Envelope) => {
          const orderingKey = envelope.orderingKey ?? '';
          const seq = (JSON.parse(new TextDecoder().decode(envelope.body)) as { seq: number }).seq;
          if (running.has(orderingKey)) overlaps.push(`${orderingKey}-${seq}`);
          running.add(orderingKey);
          seen.get(orderingKey)?.push(seq);
          timeline.push(keyOf(envelope) ?? '');
          await sleep(2);
          running.delete(orderingKey);
          // k1's message 2 fails twice: it is retried in place, ahead of k1's later messages.
          if (orderingKey === 'k1' && seq === 2 && envelope.deliveryCount < 3)
            return outcomeFor(envelope, 'retry', 300);
          done++;
          return outcomeFor(envelope, 'ack', 0);
        },
      },
      { ordering: {}, concurrency: 4 },
    );
    // Published once the group is there: an ordered group may start from its first subscribe
    // (RabbitMQ's partition queues get no back-fill from the topic's log).
    for (let seq = 0; seq < per; seq++) {
      for (const orderingKey of keys) {
        await transport.publish({ topic, key: `${orderingKey}-${seq}`, orderingKey, body: { seq } });
      }
    }
    await test().waitFor(() => done === keys.length * per, 'every message acked');
    expect(overlaps).toEqual([]);
    for (const key of keys) {
      const expected = Array.from({ length: per }, (_, seq) => seq);
      if (key === 'k1') expected.splice(2, 0, 2, 2);
      expect(seen.get(key)).toEqual(expected);
    }
    // While k1-2 waited for its retries, the other keys went on.
    const firstTry = timeline.indexOf('k1-2');
    const lastTry = timeline.lastIndexOf('k1-2');
    expect(timeline.slice(firstTry, lastTry).filter((key) => !key.startsWith('k1')).length).toBeGreaterThan(
      0,
    );
  });

  it('refuses ordered consumption when it cannot keep per-key order (no ordering capability)', async (ctx) => {
    const { transport, topic, group } = test();
    if (transport.capabilities.ordering) ctx.skip();
    await expect(
      transport.subscribe(group, [topic], () => Promise.reject(new Error('never')), { ordering: {} }),
    ).rejects.toThrow(/ordering/);
  });

  describeTransportPartitionCountCases(test);
}
