import { expect, it } from 'vitest';
import type { Envelope } from '../core/envelope.js';
import { unprocessedBase, type Outcome } from '../core/outcome.js';
import type { TransportCase } from './transport-conformance.js';
import { keyOf, outcomeFor, sleep } from './transport-conformance-fixture.js';
import { describeTransportPartitionCountCases } from './transport-conformance-partitions.js';

/**
 * Per-key ordered consumption (ordering capability); refused where the transport has no ordering. A
 * change of a group's partition count is refused, or drained on request.
 */
export function describeTransportOrderingCases(test: () => TransportCase): void {
  it('runs one key at a time in publish order, retries in place, lets other keys pass a failing one, and dead-letters at the attempt reached in place', async (ctx) => {
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
          // k3's message 4 fails once, then is dead-lettered at its second attempt, made in place.
          if (orderingKey === 'k3' && seq === 4)
            return envelope.deliveryCount < 2
              ? outcomeFor(envelope, 'retry', 300)
              : (done++, outcomeFor(envelope, 'dead-letter', 0));
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
    await test().waitFor(() => done === keys.length * per, 'every message acked or dead-lettered');
    expect(overlaps).toEqual([]);
    for (const key of keys) {
      const expected = Array.from({ length: per }, (_, seq) => seq);
      if (key === 'k1') expected.splice(2, 0, 2, 2);
      if (key === 'k3') expected.splice(4, 0, 4);
      expect(seen.get(key)).toEqual(expected);
    }
    // The dead letter names the attempt it was reached at, the in-place retry's, not the received copy's.
    if (transport.capabilities.deadLetter) {
      await test().waitFor(
        async () => (await transport.deadLetters.list({ group })).length > 0,
        'the dead letter of k3-4',
      );
      const letters = await transport.deadLetters.list({ group });
      expect(letters.map((letter) => [letter.key, letter.deliveryCount])).toEqual([['k3-4', 2]]);
    }
    // While k1-2 waited for its retries, the other keys went on.
    const firstTry = timeline.indexOf('k1-2');
    const lastTry = timeline.lastIndexOf('k1-2');
    expect(timeline.slice(firstTry, lastTry).filter((key) => !key.startsWith('k1')).length).toBeGreaterThan(
      0,
    );
  });

  it("with onExhausted 'block', keeps a used-up message unsettled and its key blocked while other keys go on", async (ctx) => {
    const { transport, topic, group } = test();
    if (!transport.capabilities.ordering) ctx.skip();
    const seen: string[] = [];
    let blocked = 0;
    let done = 0;
    await test().subscribeProcessor(
      group,
      {
        process: (envelope: Envelope) => {
          const key = keyOf(envelope) ?? '';
          seen.push(key);
          // b-0 used up its retries twice: the gate runs it again; nothing of it may be settled meanwhile.
          if (key === 'b-0' && blocked < 2) {
            blocked++;
            const exhausted: Outcome = {
              ...unprocessedBase(envelope),
              kind: 'dead',
              action: 'dead-letter',
              reason: 'retries-exhausted',
              error: new Error('conformance: retries used up'),
            };
            return Promise.resolve(exhausted);
          }
          done++;
          return Promise.resolve(outcomeFor(envelope, 'ack', 0));
        },
      },
      { ordering: { onExhausted: 'block', blockedRetryEvery: '300ms' }, concurrency: 2 },
    );
    for (const [key, orderingKey] of [
      ['b-0', 'b'],
      ['b-1', 'b'],
      ['o-0', 'o'],
      ['o-1', 'o'],
    ] as const) {
      await transport.publish({ topic, key, orderingKey, body: { key } });
    }
    await test().waitFor(() => done === 4, 'every message acked once the blocked one succeeded');
    // b-0 ran three times, b-1 only after it; the other key did not wait for b.
    expect(seen.filter((key) => key.startsWith('b-'))).toEqual(['b-0', 'b-0', 'b-0', 'b-1']);
    expect(seen.indexOf('o-1')).toBeLessThan(seen.lastIndexOf('b-0'));
    // A blocked message is held, never dead-lettered (nor acked) at a blocked attempt.
    if (transport.capabilities.deadLetter) expect(await transport.deadLetters.list({ group })).toEqual([]);
  });

  it('settles an acked ordered message for good: the next member of the group never gets it again', async (ctx) => {
    const { transport, topic, group } = test();
    if (!transport.capabilities.ordering) ctx.skip();
    const keys = ['a', 'b', 'c'];
    const per = 3;
    let acked = 0;
    const first = await test().subscribeProcessor(
      group,
      { process: (envelope) => (acked++, Promise.resolve(outcomeFor(envelope, 'ack', 0))) },
      { ordering: {}, concurrency: 2 },
    );
    for (let seq = 0; seq < per; seq++) {
      for (const orderingKey of keys) {
        await transport.publish({ topic, key: `${orderingKey}-${seq}`, orderingKey, body: { seq } });
      }
    }
    await test().waitFor(() => acked === keys.length * per, 'every message acked');
    await first.close();
    // The next member takes the partitions over with whatever the first left unsettled, ahead of
    // later messages of the same keys: once each key's marker came, an unsettled one would have too.
    const seen: string[] = [];
    await test().subscribe(group, (envelope) => (seen.push(keyOf(envelope) ?? ''), 'ack'), {
      ordering: {},
      concurrency: 2,
    });
    for (const orderingKey of keys) {
      await transport.publish({ topic, key: `${orderingKey}-marker`, orderingKey, body: {} });
    }
    await test().waitFor(() => seen.length >= keys.length, "each key's marker");
    await sleep(300);
    expect(seen.sort()).toEqual(keys.map((key) => `${key}-marker`));
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
