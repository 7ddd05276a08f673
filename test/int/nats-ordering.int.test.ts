// Per-key ordered consumption over NATS JetStream: producers publish on 64 slot subjects by the hash
// of the ordering key, an ordered group's partitions are durable consumers on slot prefixes, and a
// member consumes a partition only while it holds the partition's lease. Several members
// (transports of their own, as separate processes would have), connections dropped and a member
// closed mid-run.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NatsTransport, type NatsTransportConfig } from 'oncemq/nats';
import { outcomeFor, sleep, unique, waitFor } from '../../src/testing/transport-conformance-fixture.js';
import { runOrderedScenario } from '../support/ordered-orders.js';
import { findPostgres } from '../support/postgres.js';
import { findService } from '../support/services.js';
import { adminOf, NATS_SERVICE, natsUnderTest, QUICK_NATS, type NatsUnderTest } from '../support/nats.js';

const nats = await findService(NATS_SERVICE);
const postgres = await findPostgres();

const ORDERED: NatsTransportConfig = { partitions: 4, partitionLease: '3s' };

describe.skipIf(!nats.available || !postgres.available)(
  'per-key ordered consumption over NATS JetStream',
  () => {
    let under: NatsUnderTest;
    const others: NatsTransport[] = [];

    /** Another member of the same namespace, through the same proxy: another process's transport. */
    const open = (config: NatsTransportConfig = {}): NatsTransport => {
      const transport = new NatsTransport({
        ...QUICK_NATS,
        ...ORDERED,
        streamPrefix: under.streamPrefix,
        subjectPrefix: under.subjectPrefix,
        servers: `nats://127.0.0.1:${under.proxy.port}`,
        ...config,
      });
      others.push(transport);
      return transport;
    };

    beforeEach(async () => {
      under = await natsUnderTest(nats.url, ORDERED);
    });

    afterEach(async () => {
      for (const transport of others.splice(0)) await transport.close();
      await under.transport.close();
      await under.cleanup();
    });

    it('applies create → pay → ship in order for every order, once, across members, drops and a poison', async () => {
      const topic = unique('orders');
      const group = unique('fulfilment');
      const members: NatsTransport[] = [];
      const result = await runOrderedScenario(
        {
          topic,
          group,
          publish: (message) => under.transport.publish(message),
          subscribe: (member, pipeline) => {
            members[member] ??= open();
            return members[member].subscribe(group, [topic], pipeline, { ordering: {}, concurrency: 8 });
          },
          dropConnections: () => {
            under.proxy.dropConnections();
          },
          deadLetters: () => under.transport.deadLetters.list({ group }),
        },
        { postgresUrl: postgres.url, orders: 600 },
      );
      expect(result.effects).toBe(1799);
    }, 180_000);

    it('gives each partition to one member at a time, and hands it over when that member closes', async () => {
      const topic = unique('orders');
      const group = unique('fulfilment');
      const handler = (): Promise<never> => Promise.reject(new Error('unused'));
      const first = await open().subscribe(group, [topic], handler, { ordering: {} });
      const second = await open().subscribe(group, [topic], handler, { ordering: {} });
      const owned = (subscription: typeof first): readonly number[] =>
        'owned' in subscription ? subscription.owned : [];
      await waitFor(() => owned(first).length + owned(second).length === 4, 'every partition owned', 10_000);
      expect([...owned(first), ...owned(second)].sort()).toEqual([0, 1, 2, 3]);
      // Over several lease renewals, no partition is ever owned by both.
      const both: number[] = [];
      const until = Date.now() + 3_000;
      while (Date.now() < until) {
        both.push(...owned(first).filter((index) => owned(second).includes(index)));
        await sleep(20);
      }
      expect(both).toEqual([]);
      await first.close();
      await waitFor(() => owned(second).length === 4, 'the second member owning every partition', 10_000);
      await second.close();
    });

    it('publishes every message of an ordering key on one slot subject, and keys on several', async () => {
      const topic = unique('orders');
      for (let i = 0; i < 40; i++) {
        await under.transport.publish({ topic, key: `a-${i}`, orderingKey: 'order-a', body: {} });
        await under.transport.publish({ topic, key: `k-${i}`, orderingKey: `order-${i}`, body: {} });
      }
      const { jsm, close } = await adminOf(nats.url);
      try {
        const info = await jsm.streams.info(`${under.streamPrefix}_${topic}`, { subjects_filter: '>' });
        const subjects = info.state.subjects ?? {};
        expect(Math.max(...Object.values(subjects))).toBeGreaterThanOrEqual(40);
        expect(Object.keys(subjects).length).toBeGreaterThan(10);
        for (const subject of Object.keys(subjects)) {
          expect(subject).toMatch(new RegExp(`^${under.subjectPrefix}\\.${topic}\\.s(\\.[01]){6}$`));
        }
      } finally {
        await close();
      }
    });

    it('replays a dead letter of an ordered group on its key’s partition, for that group only', async () => {
      const topic = unique('orders');
      const group = unique('fulfilment');
      const other = unique('billing');
      const seen: string[] = [];
      const otherSeen: string[] = [];
      const subscription = await under.transport.subscribe(
        group,
        [topic],
        (envelope) => {
          seen.push(envelope.orderingKey ?? '');
          return Promise.resolve(outcomeFor(envelope, 'dead-letter', 0));
        },
        { ordering: {} },
      );
      const unordered = await under.transport.subscribe(other, [topic], (envelope) => {
        otherSeen.push(envelope.brokerId);
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      });
      await under.transport.publish({ topic, key: 'order-1-pay', orderingKey: 'order-1', body: {} });
      await waitFor(
        async () => (await under.transport.deadLetters.list({ group })).length === 1,
        'the dead letter',
        10_000,
      );
      const [letter] = await under.transport.deadLetters.list({ group });
      expect(await under.transport.deadLetters.replay(group, [letter?.id ?? ''])).toBe(1);
      await waitFor(() => seen.length === 2, 'the replayed copy processed', 10_000);
      expect(seen).toEqual(['order-1', 'order-1']);
      // The replay went back to the topic's stream on order-1's slot: the other group acked it unseen.
      const { jsm, close } = await adminOf(nats.url);
      try {
        const stream = `${under.streamPrefix}_${topic}`;
        await waitFor(
          async () => (await jsm.consumers.info(stream, other)).num_ack_pending === 0,
          'the other group settled the replay',
          10_000,
        );
        expect((await jsm.streams.info(stream)).state.messages).toBe(2);
      } finally {
        await close();
      }
      expect(otherSeen).toHaveLength(1);
      await subscription.close();
      await unordered.close();
    });

    it('refuses a member configured with another partition count, naming both', async () => {
      const topic = unique('orders');
      const group = unique('fulfilment');
      const handler = (): Promise<never> => Promise.reject(new Error('unused'));
      const first = await under.transport.subscribe(group, [topic], handler, { ordering: {} });
      await first.close();
      await expect(
        open({ partitions: 8 }).subscribe(group, [topic], handler, { ordering: {} }),
      ).rejects.toThrow(/ordered over 4 partitions .* configured with 8/);
    });

    it('refuses a partition count that is not a power of two up to 64', () => {
      expect(() => new NatsTransport({ partitions: 6 })).toThrow(/partitions.*power of two/);
      expect(() => new NatsTransport({ partitions: 128 })).toThrow(/partitions/);
    });
  },
);
