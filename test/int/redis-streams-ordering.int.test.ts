// Per-key ordered consumption over Redis Streams: shard streams picked by the producer, partitions
// consumed by the holder of their lease, several members (transports of their own, as separate
// processes would have), connections dropped, a member swapped mid-run, handover, fencing, the
// partition count checked and drained.
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope, Outcome } from 'oncemq';
import type { RedisStreamsTransportConfig } from 'oncemq/redis-streams';
import { keyOf, outcomeFor, sleep, unique, waitFor } from '../support/internal.js';
import { runOrderedScenario } from '../support/ordered-orders.js';
import { findPostgres } from '../support/postgres.js';
import { REDIS_CLIENT_KINDS, REDIS_SERVICE } from '../support/redis.js';
import { gate, proxiedStreams, type ProxiedStreams } from '../support/redis-streams.js';
import { findService } from '../support/services.js';

const service = await findService(REDIS_SERVICE);
const postgres = await findPostgres();

interface Ordered {
  readonly partitions: readonly number[];
  readonly token: string;
  close(): Promise<void>;
}

describe.skipIf(!service.available).each(REDIS_CLIENT_KINDS)(
  'per-key ordered consumption over Redis Streams (%s)',
  (kind) => {
    const opened: ProxiedStreams[] = [];
    const closers: (() => Promise<void>)[] = [];
    let prefix = '';

    afterEach(async () => {
      for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
      for (const streams of opened.splice(0).reverse()) await streams.close().catch(() => undefined);
      prefix = '';
    });

    /** A transport of its own (a member's process) on the test's prefix, through a proxy of its own. */
    const open = async (
      config: Omit<RedisStreamsTransportConfig, 'client'> = {},
    ): Promise<ProxiedStreams> => {
      const streams = await proxiedStreams(kind, service.url, {
        ...(prefix === '' ? {} : { prefix }),
        ...config,
      });
      prefix = streams.prefix;
      opened.unshift(streams);
      return streams;
    };

    /** Subscribes an ordered member answering with `answer`, recording the keys it saw in order. */
    const member = async (
      streams: ProxiedStreams,
      group: string,
      topic: string,
      answer: (envelope: Envelope) => Promise<Outcome> | Outcome,
      options: { name?: string; drain?: boolean } = {},
    ): Promise<Ordered> => {
      const subscription = (await streams.transport.subscribe(
        group,
        [topic],
        async (envelope) => answer(envelope),
        {
          ordering: options.drain === true ? { onPartitionChange: 'drain' } : {},
          concurrency: 4,
          visibility: '600ms',
          ...(options.name === undefined ? {} : { consumerName: options.name }),
        },
      )) as unknown as Ordered;
      closers.push(() => subscription.close());
      return subscription;
    };

    const ack = (seen: string[]) => (envelope: Envelope) => {
      seen.push(keyOf(envelope) ?? '');
      return outcomeFor(envelope, 'ack', 0);
    };

    it.skipIf(!postgres.available)(
      'applies create → pay → ship in order for every order, once, across members, drops and a poison',
      async () => {
        const producer = await proxiedStreams(kind, service.url, {});
        closers.push(() => producer.close());
        const topic = unique('orders');
        const group = unique('fulfilment');
        const members: ProxiedStreams[] = [];
        const result = await runOrderedScenario(
          {
            topic,
            group,
            publish: (message) => producer.transport.publish(message),
            subscribe: async (index, pipeline) => {
              if (members[index] === undefined) {
                const streams = await proxiedStreams(kind, service.url, { prefix: producer.prefix });
                closers.push(() => streams.close());
                members[index] = streams;
              }
              return members[index].transport.subscribe(group, [topic], pipeline, {
                ordering: {},
                concurrency: 8,
                visibility: '2s',
                consumerName: `member-${index}`,
              });
            },
            dropConnections: async () => {
              await Promise.all(members.map((streams) => streams.dropConnections()));
            },
            deadLetters: () => producer.transport.deadLetters.list({ group }),
          },
          { postgresUrl: postgres.url, orders: 600 },
        );
        expect(result.effects).toBe(1799);
      },
      180_000,
    );

    it('writes every message of one ordering key to one shard stream, picked by the producer alone', async () => {
      const streams = await open();
      const topic = unique('orders');
      const group = unique('fulfilment');
      const held = gate();
      await member(streams, group, topic, async (envelope) => {
        await held.opened;
        return outcomeFor(envelope, 'ack', 0);
      });
      for (let i = 0; i < 20; i++) {
        await streams.transport.publish({ topic, key: `k-${i}`, orderingKey: 'order-7', body: {} });
      }
      const { keys } = streams.transport.settings;
      const lengths = await Promise.all(
        Array.from({ length: 64 }, async (_, slot) =>
          Number(await streams.admin.send('XLEN', keys.shard(topic, slot))),
        ),
      );
      expect(lengths.filter((n) => n > 0)).toEqual([20]);
      expect(Number(await streams.admin.send('XLEN', keys.topic(topic)))).toBe(20);
      held.open();
    });

    it('hands a dead member’s partitions to the next member, which runs what it left pending first, in order', async () => {
      const topic = unique('orders');
      const group = unique('fulfilment');
      const first = await open({ timeout: '500ms' });
      const second = await open();
      const stuck = gate();
      const firstSeen: string[] = [];
      const a = await member(
        first,
        group,
        topic,
        async (envelope) => {
          firstSeen.push(keyOf(envelope) ?? '');
          await stuck.opened;
          return outcomeFor(envelope, 'ack', 0);
        },
        { name: 'a' },
      );
      expect(a.partitions).toEqual([0, 1, 2, 3]);
      const seen: string[] = [];
      const b = await member(second, group, topic, ack(seen), { name: 'b' });
      expect(b.partitions).toEqual([]);
      for (const step of ['m1', 'm2', 'm3']) {
        await second.transport.publish({ topic, key: step, orderingKey: 'order-1', body: {} });
      }
      await waitFor(() => firstSeen.length === 1, 'the first member running m1', 10_000);
      // The first member dies: its connections go, its lease is not renewed.
      await first.proxy.close();
      await waitFor(() => b.partitions.length === 4, 'the second member taking the partitions', 10_000);
      await second.transport.publish({ topic, key: 'm4', orderingKey: 'order-1', body: {} });
      await waitFor(() => seen.length === 4, 'the second member running the four', 10_000);
      expect(seen).toEqual(['m1', 'm2', 'm3', 'm4']);
      stuck.open();
    });

    it('refuses every read and settle of a member that lost its lease, and it takes over again once it gets it back', async () => {
      const streams = await open();
      const topic = unique('orders');
      const group = unique('fulfilment');
      const held = gate();
      const seen: string[] = [];
      const a = await member(streams, group, topic, async (envelope) => {
        seen.push(keyOf(envelope) ?? '');
        if (seen.length === 1) await held.opened;
        return outcomeFor(envelope, 'ack', 0);
      });
      await streams.transport.publish({ topic, key: 'm1', orderingKey: 'order-1', body: {} });
      await waitFor(() => seen.length === 1, 'm1 running', 10_000);
      const { keys } = streams.transport.settings;
      const partitionKeys = Array.from({ length: 4 }, (_, index) => keys.lease(group, 4, index));
      // Another member took every lease (this one stalled past it, say).
      for (const lease of partitionKeys)
        await streams.admin.send('SET', lease, 'another-member', 'PX', '1500');
      held.open();
      await streams.transport.publish({ topic, key: 'm2', orderingKey: 'order-1', body: {} });
      await sleep(400);
      // m1's ack was refused (still pending), and m2 was not read.
      const shard = streams.transport.settings.keys.shard(topic, 0).replace(/@0$/, '');
      const pending = await Promise.all(
        Array.from({ length: 64 }, async (_, slot) =>
          Number(((await streams.admin.send('XPENDING', `${shard}@${slot}`, group)) as unknown[])[0]),
        ),
      );
      expect(pending.reduce((a, b) => a + b, 0)).toBe(1);
      expect(seen).toEqual(['m1']);
      // The leases expire: the member takes its partitions again, and m1 before m2.
      await waitFor(() => seen.length === 3, 'm1 again, then m2', 10_000);
      expect(seen).toEqual(['m1', 'm1', 'm2']);
      expect(a.partitions).toEqual([0, 1, 2, 3]);
    });

    it("drains: with onPartitionChange 'drain' a member waits for the old count's members, then runs a key's old messages before its new ones", async () => {
      const old = await open({ partitions: 2 });
      const next = await open({ partitions: 4 });
      const topic = unique('orders');
      const group = unique('fulfilment');
      const oldSeen: string[] = [];
      // The old member never gets m1 through: it closes with m1 waiting for its retry, m2 and m3 behind it.
      const a = await member(old, group, topic, (envelope) => {
        oldSeen.push(keyOf(envelope) ?? '');
        return outcomeFor(envelope, 'retry', 50);
      });
      for (const step of ['m1', 'm2', 'm3']) {
        await old.transport.publish({ topic, key: step, orderingKey: 'order-1', body: {} });
      }
      await waitFor(() => oldSeen.length >= 2, 'm1 retried in place', 10_000);
      const seen: string[] = [];
      const b = await member(next, group, topic, ack(seen), { drain: true });
      await next.transport.publish({ topic, key: 'm4', orderingKey: 'order-1', body: {} });
      await sleep(700);
      expect(b.partitions).toEqual([]);
      expect(seen).toEqual([]);
      expect(oldSeen.every((key) => key === 'm1')).toBe(true);
      await a.close();
      expect(oldSeen.every((key) => key === 'm1')).toBe(true);
      await waitFor(() => seen.length === 4, 'the four on the new count', 10_000);
      expect(seen).toEqual(['m1', 'm2', 'm3', 'm4']);
      expect(b.partitions).toEqual([0, 1, 2, 3]);
      expect(String(await next.admin.send('GET', next.transport.settings.keys.partitions(group)))).toBe('4');
    });

    it('replays a dead letter of an ordered group onto its shard, for that group only', async () => {
      const streams = await open();
      const topic = unique('orders');
      const group = unique('fulfilment');
      const otherGroup = unique('billing');
      const seen: string[] = [];
      const otherSeen: string[] = [];
      await member(streams, group, topic, (envelope) => {
        seen.push(envelope.brokerId);
        return outcomeFor(envelope, seen.length === 1 ? 'dead-letter' : 'ack', 0);
      });
      await member(streams, otherGroup, topic, ack(otherSeen));
      await streams.transport.publish({ topic, key: 'order-1-pay', orderingKey: 'order-1', body: {} });
      await waitFor(
        async () => (await streams.transport.deadLetters.list({ group })).length === 1,
        'the dead letter',
        10_000,
      );
      const [letter] = await streams.transport.deadLetters.list({ group });
      const shard = streams.transport.settings.keys.shardOf(letter?.brokerId ?? '');
      expect(shard).toBeDefined();
      expect(await streams.transport.deadLetters.replay(group, [letter?.id ?? ''])).toBe(1);
      await waitFor(() => seen.length === 2, 'the replayed copy processed', 10_000);
      expect(seen[1]?.startsWith(`${shard ?? ''}/`)).toBe(true);
      await sleep(300);
      expect(otherSeen).toEqual(['order-1-pay']);
    });
  },
);
