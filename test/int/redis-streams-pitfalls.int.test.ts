import { describe, expect, it } from 'vitest';
import type { Envelope, Outcome } from 'oncemq';
import { type Answer, keyOf, outcomeFor } from '../support/internal.js';
import { waitUntil } from '../support/local-points.js';
import { sleep } from '../support/points.js';
import { REDIS_CLIENT_KINDS, REDIS_SERVICE } from '../support/redis.js';
import { gate, leavePending, streamsEachTest, type ProxiedStreams } from '../support/redis-streams.js';
import { findService } from '../support/services.js';

const service = await findService(REDIS_SERVICE);

const topic = 'payments';
const group = 'points';

/** A processor answering every delivery as `answer` says (after its promise, if any). */
const answering =
  (answer: (envelope: Envelope) => Answer | Promise<Answer>, delayMs = 50) =>
  async (envelope: Envelope): Promise<Outcome> =>
    outcomeFor(envelope, await answer(envelope), delayMs);

/** A processor that acks every delivery and records it in `seen`. */
const recording = (seen: Envelope[]) => answering((envelope) => (seen.push(envelope), 'ack'));

/** The names of the consumers of `group` on `stream` (by a script: one reply shape for both clients). */
const consumersOf = async (streams: ProxiedStreams, stream: string): Promise<string[]> =>
  (await streams.admin.send(
    'EVAL',
    "local names = {} for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do names[#names + 1] = c[2] end return names",
    '1',
    stream,
    group,
  )) as string[];

/** How many entries of `group` on `stream` are pending. */
const pendingCount = async (streams: ProxiedStreams, stream: string): Promise<number> =>
  Number(
    await streams.admin.send(
      'EVAL',
      "return redis.call('XPENDING', KEYS[1], ARGV[1])[1]",
      '1',
      stream,
      group,
    ),
  );

describe.skipIf(!service.available)('Redis Streams transport: the pitfalls of TRANSPORTS.md', () => {
  describe.each(REDIS_CLIENT_KINDS)('with %s', (kind) => {
    const { open, subscriptions } = streamsEachTest(kind, service.url, { failureBackoff: '50ms' });

    it('a member restarted under its consumer name is handed what it left pending at once, before new entries (#1)', async () => {
      const streams = await open();
      const { transport } = streams;
      // A run of member-a read both and died before settling them.
      const stream = await leavePending(streams, group, 'member-a', topic, ['left-1', 'left-2']);
      await transport.publish({ topic, key: 'new-1', body: {} });
      const seen: Envelope[] = [];
      const process = recording(seen);
      // A visibility of an hour: nothing but reading its own pending list can hand the two out.
      subscriptions.push(
        await transport.subscribe(group, [topic], process, { consumerName: 'member-a', visibility: '1h' }),
      );
      await waitUntil(() => seen.length === 3, 'three deliveries');
      expect(seen.map(keyOf)).toEqual(['left-1', 'left-2', 'new-1']);
      expect(seen.map((envelope) => envelope.brokerDeliveryCount)).toEqual([2, 2, 1]);
      expect(seen.map((envelope) => envelope.deliveryCount)).toEqual([1, 1, 1]);
      await waitUntil(async () => (await pendingCount(streams, stream)) === 0, 'every entry acked');
    });

    it('entries a dead member left pending are taken by a live member once idle past the visibility (#1, XAUTOCLAIM)', async () => {
      const streams = await open();
      const { transport } = streams;
      const stream = await leavePending(streams, group, 'dead-member', topic, ['orphan-1', 'orphan-2']);
      const seen: Envelope[] = [];
      subscriptions.push(
        await transport.subscribe(group, [topic], recording(seen), {
          consumerName: 'live-member',
          visibility: 300,
        }),
      );
      await waitUntil(() => seen.length === 2, 'both orphans');
      expect(seen.map(keyOf).sort()).toEqual(['orphan-1', 'orphan-2']);
      expect(seen.map((envelope) => envelope.brokerDeliveryCount)).toEqual([2, 2]);
      await waitUntil(async () => (await pendingCount(streams, stream)) === 0, 'both acked');
    });

    it('a member whose entry another member claimed settles nothing: its late retry stores no second copy (#2)', async () => {
      const streams = await open();
      const { transport, admin } = streams;
      const keys = transport.settings.keys;
      await transport.publish({ topic, key: 'slow', body: {} });
      const seen: string[] = [];
      const claimedByB = gate();
      // Member a (busy: no room to claim anything back) runs past the visibility without keeping it alive.
      const a = answering(async (): Promise<Answer> => {
        seen.push('a');
        await claimedByB.opened;
        return 'retry';
      });
      subscriptions.push(
        await transport.subscribe(group, [topic], a, { consumerName: 'a', concurrency: 1, visibility: 300 }),
      );
      await waitUntil(() => seen.length === 1, 'member a has it');
      const b = answering(() => (seen.push('b'), claimedByB.open(), 'ack'));
      subscriptions.push(
        await transport.subscribe(group, [topic], b, { consumerName: 'b', visibility: 300 }),
      );
      await waitUntil(() => seen.length === 2, 'member b claimed it');
      // Member a's retry, due 50ms after its outcome, would come back here if it had stored a copy.
      await sleep(600);
      expect(seen).toEqual(['a', 'b']);
      expect(Number(await admin.send('ZCARD', keys.delayed(group)))).toBe(0);
      expect(Number(await admin.send('XLEN', keys.retry(group)))).toBe(0);
    });

    it('the broker counts deliveries that got no outcome, the charged count stays: past maxDeliveries the entry is dead-lettered with reason delivery-limit (#3)', async () => {
      const { transport } = await open({ maxDeliveries: 2 });
      await transport.publish({ topic, key: 'crashy', body: {} });
      const seen: Envelope[] = [];
      subscriptions.push(
        await transport.subscribe(group, [topic], (envelope) => {
          seen.push(envelope);
          return Promise.reject(new Error('the consumer crashed'));
        }),
      );
      await waitUntil(
        async () => (await transport.deadLetters.list({ group })).length === 1,
        'the dead letter',
      );
      expect(seen.map((envelope) => [envelope.deliveryCount, envelope.brokerDeliveryCount])).toEqual([
        [1, 1],
        [1, 2],
      ]);
      const [letter] = await transport.deadLetters.list({ group });
      expect(letter).toMatchObject({ reason: 'delivery-limit', key: 'crashy', deliveryCount: 1, topic });
      expect(letter?.error).toMatch(/handed out 3 times without an outcome/);
    });

    it('trimming removes only entries every group is done with: never one pending, nor one a group has not read (#4)', async () => {
      const streams = await open({ trimInterval: '50ms', retention: 0 });
      const { transport, admin } = streams;
      const stream = transport.settings.keys.topic(topic);
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) {
        const receipt = await transport.publish({ topic, key: `key-${i}`, body: {} });
        ids.push(String(receipt.position?.id));
      }
      const key3 = gate();
      const acked = new Set<string>();
      const process = answering(async (envelope): Promise<Answer> => {
        if (keyOf(envelope) === 'key-3') await key3.opened;
        acked.add(keyOf(envelope) ?? '');
        return 'ack';
      });
      subscriptions.push(await transport.subscribe(group, [topic], process));
      await waitUntil(() => acked.size === 9, 'all but key-3 acked');
      await waitUntil(async () => Number(await admin.send('XLEN', stream)) === 7, 'the acked head trimmed');
      await sleep(300);
      expect(Number(await admin.send('XLEN', stream))).toBe(7);
      const [first] = (await admin.send('XRANGE', stream, '-', '+', 'COUNT', '1')) as [string, unknown][];
      expect(first?.[0]).toBe(ids[3]);
      key3.open();
      await waitUntil(
        async () => Number(await admin.send('XLEN', stream)) === 1,
        'all but the last read trimmed',
      );

      // A group that has read nothing yet keeps every entry.
      await admin.send('XGROUP', 'CREATE', stream, 'late-group', '0');
      for (let i = 10; i < 15; i++) await transport.publish({ topic, key: `key-${i}`, body: {} });
      await waitUntil(() => acked.size === 15, 'the new ones acked by the first group');
      await sleep(300);
      expect(Number(await admin.send('XLEN', stream))).toBe(6);
    });

    it('a closing member leaves the group only when nothing is pending for it (#5: DELCONSUMER would discard its entries)', async () => {
      const streams = await open();
      const { transport } = streams;
      const stream = transport.settings.keys.topic(topic);
      await transport.publish({ topic, key: 'stuck', body: {} });
      let tries = 0;
      const failing = await transport.subscribe(
        group,
        [topic],
        () => (tries++, Promise.reject(new Error('down'))),
        { consumerName: 'member-a', visibility: '1h' },
      );
      await waitUntil(() => tries >= 1, 'a delivery');
      await failing.close();
      const clean = await transport.subscribe(
        group,
        [topic],
        answering(() => 'ack'),
        {
          consumerName: 'member-b',
        },
      );
      await clean.close();
      expect(await consumersOf(streams, stream)).toEqual(['member-a']);
      expect(await pendingCount(streams, stream)).toBe(1);
    });

    it('a dead letter whose copy cannot be stored is not acked: the delivery comes again (#6: copy, then ack, in one script)', async () => {
      const streams = await open();
      const { transport, admin } = streams;
      const deadKey = transport.settings.keys.deadLetters(group);
      await transport.publish({ topic, key: 'poison', body: {} });
      await admin.send('SET', deadKey, 'not a stream');
      const seen: string[] = [];
      subscriptions.push(
        await transport.subscribe(
          group,
          [topic],
          answering((envelope) => (seen.push(envelope.brokerId), 'dead-letter')),
        ),
      );
      await waitUntil(() => seen.length >= 2, 'the delivery again');
      expect(new Set(seen).size).toBe(1);
      await admin.send('DEL', deadKey);
      await waitUntil(
        async () => (await transport.deadLetters.list({ group })).length === 1,
        'the dead letter',
      );
      expect(await pendingCount(streams, transport.settings.keys.topic(topic))).toBe(0);
    });

    it('a retry whose copy cannot be stored is not acked: the delivery comes again, not charged (#6)', async () => {
      const streams = await open();
      const { transport, admin } = streams;
      const delayedKey = transport.settings.keys.delayed(group);
      await admin.send('SET', delayedKey, 'not a sorted set');
      await transport.publish({ topic, key: 'flaky', body: {} });
      const seen: Envelope[] = [];
      subscriptions.push(
        await transport.subscribe(
          group,
          [topic],
          answering((envelope) => {
            seen.push(envelope);
            if (seen.length === 2) void admin.send('DEL', delayedKey);
            return envelope.deliveryCount === 1 ? 'retry' : 'ack';
          }),
        ),
      );
      await waitUntil(() => seen.some((envelope) => envelope.deliveryCount === 2), 'the retried copy');
      expect(seen[1]).toMatchObject({ brokerId: seen[0]?.brokerId, deliveryCount: 1 });
    });

    it('delayed retries outlive the member that scheduled them: another member of the group moves them when due (#6)', async () => {
      const { transport } = await open({ retryPollInterval: '100ms' });
      await transport.publish({ topic, key: 'later', body: {} });
      let tries = 0;
      const first = await transport.subscribe(
        group,
        [topic],
        answering(() => (tries++, 'retry'), 300),
      );
      await waitUntil(() => tries === 1, 'the first delivery');
      // Closing settles it: the retry is stored before the member leaves.
      await first.close();
      const seen: Envelope[] = [];
      subscriptions.push(await transport.subscribe(group, [topic], recording(seen)));
      await waitUntil(() => seen.length === 1, 'the retried copy');
      expect(seen[0]).toMatchObject({ topic, deliveryCount: 2 });
      expect(keyOf(seen[0] as Envelope)).toBe('later');
    });

    it('a group subscribing after messages were published receives them (created at id 0), and later members join it (#7)', async () => {
      const { transport } = await open();
      for (let i = 0; i < 5; i++) await transport.publish({ topic, key: `early-${i}`, body: {} });
      const seen: string[] = [];
      const process = answering((envelope) => (seen.push(keyOf(envelope) ?? ''), 'ack'));
      subscriptions.push(await transport.subscribe(group, [topic], process));
      subscriptions.push(await transport.subscribe(group, [topic], process));
      await waitUntil(() => seen.length === 5, 'every early message');
      expect(seen.sort()).toEqual(['early-0', 'early-1', 'early-2', 'early-3', 'early-4']);
    });

    it('the blocking read holds a connection of its own: the client given to the transport is never blocked (#8)', async () => {
      const streams = await open({ block: '30s' });
      const { transport, client, admin, prefix } = streams;
      await client.send('CLIENT', 'SETNAME', `user-${prefix}`);
      const seen: string[] = [];
      subscriptions.push(
        await transport.subscribe(
          group,
          [topic],
          answering((envelope) => (seen.push(keyOf(envelope) ?? ''), 'ack')),
        ),
      );
      const line = async (name: string): Promise<string | undefined> =>
        String(await admin.send('CLIENT', 'LIST'))
          .split('\n')
          .find((entry) => entry.includes(` name=${name} `));
      await waitUntil(
        async () => /cmd=xreadgroup/.test(String(await admin.send('CLIENT', 'LIST'))),
        'a read',
      );
      await sleep(200);
      expect(await line(`user-${prefix}`)).not.toMatch(/cmd=xreadgroup/);
      await transport.publish({ topic, key: 'while-blocked', body: {} });
      await waitUntil(() => seen.length === 1, 'the delivery');
    });
  });
});
