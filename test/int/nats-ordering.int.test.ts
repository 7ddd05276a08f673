// Per-key ordered consumption over NATS JetStream: producers publish on 64 slot subjects by the hash
// of the ordering key, an ordered group's partitions are durable consumers on slot prefixes, and a
// member consumes a partition only while it holds the partition's lease. Several members
// (transports of their own, as separate processes would have), connections dropped and a member
// closed mid-run.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Envelope, Subscription } from 'oncemq';
import { NatsTransport, type NatsTransportConfig } from 'oncemq/nats';
import { runOrderedScenario } from '../support/ordered-orders.js';
import { findPostgres } from '../support/postgres.js';
import { findService } from '../support/services.js';
import {
  adminOf,
  directConnection,
  NATS_SERVICE,
  natsUnderTest,
  QUICK_NATS,
  type NatsUnderTest,
} from '../support/nats.js';
import {
  leaseStream,
  leaseSubject,
  loadNatsDriver,
  NatsTopology,
  outcomeFor,
  partitionConsumer,
  PartitionLease,
  resolveNatsSettings,
  sleep,
  unique,
  waitFor,
} from '../support/internal.js';

const nats = await findService(NATS_SERVICE);
const postgres = await findPostgres();

const ORDERED: NatsTransportConfig = { partitions: 4, partitionLease: '3s' };

/** One partition: every key on one consumer, the one a take-over is about. */
const ONE: NatsTransportConfig = { partitions: 1 };

const owned = (subscription: Subscription): readonly number[] =>
  'owned' in subscription ? (subscription.owned as readonly number[]) : [];

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

    describe('a partition changing owner', () => {
      /** The steps of one order, applied in the order the members ran them. */
      const applied: number[] = [];
      const apply = (envelope: Envelope) => {
        applied.push((JSON.parse(new TextDecoder().decode(envelope.body)) as { step: number }).step);
        return Promise.resolve(outcomeFor(envelope, 'ack', 0));
      };
      const OPTIONS = { ordering: {}, visibility: '2s' } as const;
      let topic: string;
      let group: string;
      const step = (n: number): Promise<unknown> =>
        under.transport.publish({ topic, key: `order-a-${n}`, orderingKey: 'order-a', body: { step: n } });
      /** A member that takes the partition and waits until it owns it. */
      const member = async (): Promise<Subscription> => {
        const subscription = await open(ONE).subscribe(group, [topic], apply, OPTIONS);
        await waitFor(() => owned(subscription).length === 1, 'the partition owned', 10_000);
        return subscription;
      };
      /** Another owner's connection, around the members. */
      let other: NatsConnection;
      /** The partition's consumer, as another owner reaches it. */
      const partition = () =>
        jetstream(other).consumers.get(`${under.streamPrefix}_${topic}`, partitionConsumer(group, 0, 1));
      /** Copies handed to another owner, which does not settle them. */
      const takeCopies = async (count: number): Promise<JsMsg[]> => {
        const taken: JsMsg[] = [];
        for await (const msg of await (await partition()).fetch({ max_messages: count, expires: 2_000 })) {
          taken.push(msg);
        }
        expect(taken).toHaveLength(count);
        return taken;
      };
      /** The three steps applied in order, and no more afterwards; then `last` closes. */
      const appliedInOrder = async (last: Subscription): Promise<void> => {
        await waitFor(() => applied.length >= 3, 'the three steps applied', 20_000);
        await sleep(500);
        expect(applied).toEqual([1, 2, 3]);
        await last.close();
      };

      beforeEach(async () => {
        applied.length = 0;
        topic = unique('orders');
        group = unique('fulfilment');
        other = await directConnection(nats.url);
        // The consumer is in place and the lease released by an owner that left everything settled.
        await (await member()).close();
      });

      afterEach(async () => {
        await other.close();
      });

      it('processes nothing while the server counts copies pending to another owner, whatever the lease says', async () => {
        await step(1);
        await step(2);
        // An owner that vanished with copies 1 and 2 in hand: they come back after the ack wait.
        await takeCopies(2);
        await step(3);
        // A member takes the partition over while they are pending and leaves before they came back.
        await (await member()).close();
        await appliedInOrder(await member());
      }, 40_000);

      it('waits for an owner still holding copies past an ack wait, and puts them before the later step', async () => {
        await step(1);
        await step(2);
        // A slow owner: it keeps copies 1 and 2 alive longer than the new owner's wait, then hands them back.
        const held = await takeCopies(2);
        await step(3);
        const next = await member();
        const until = Date.now() + 5_000;
        while (Date.now() < until) {
          for (const msg of held) msg.working();
          await sleep(300);
        }
        expect(applied).toEqual([]);
        for (const msg of held) msg.nak();
        await appliedInOrder(next);
      }, 40_000);

      it('pulls only once no pull of another owner is open on the partition', async () => {
        // A previous owner's pull still open at the server: it is handed the first step published.
        const left = await (await partition()).fetch({ max_messages: 1, expires: 5_000 });
        const taken: number[] = [];
        const done = (async () => {
          for await (const msg of left) taken.push(msg.seq);
        })();
        const next = await member();
        await step(1);
        await step(2);
        await step(3);
        await done;
        expect(taken).toHaveLength(1);
        await appliedInOrder(next);
      }, 40_000);

      it('never sends a pull that could stay open past two thirds of its lease', async () => {
        // Every pull request the member sends, as the server receives it.
        const requests = other.subscribe(
          `$JS.API.CONSUMER.MSG.NEXT.${under.streamPrefix}_${topic}.${partitionConsumer(group, 0, 1)}`,
        );
        const expires: number[] = [];
        const seen = (async () => {
          for await (const request of requests) {
            expires.push((JSON.parse(request.string()) as { expires: number }).expires / 1_000_000);
          }
        })();
        await other.flush();
        const subscription = await open({ ...ONE, pullExpires: '5s' }).subscribe(
          group,
          [topic],
          apply,
          OPTIONS,
        );
        await waitFor(() => expires.length >= 3, 'pulls of the member', 15_000);
        await subscription.close();
        requests.unsubscribe();
        await seen;
        // The lease is 3 s: each pull ends within 2 s of the renewal before it, well before 5 s.
        expect(Math.max(...expires)).toBeLessThanOrEqual(2_000);
      }, 40_000);
    });

    it('lets one of two members racing for a free lease take it, and a holder whose entry is gone renew it no more', async () => {
      const connection = await directConnection(nats.url);
      try {
        const settings = resolveNatsSettings({ ...QUICK_NATS, ...ORDERED, ...under });
        const jsm = await jetstreamManager(connection);
        await new NatsTopology(jsm, settings).leaseStream();
        const parts = { js: jetstream(connection), jsm, driver: await loadNatsDriver(), settings };
        const subject = leaseSubject(settings, unique('racing'), 0, 1);
        const [a, b] = [new PartitionLease(parts, subject), new PartitionLease(parts, subject)];
        const taken = await Promise.all([a.acquire(), b.acquire()]);
        expect(taken.filter((predecessor) => predecessor !== null)).toHaveLength(1);
        const [holder, other] = a.holds() ? [a, b] : [b, a];
        // The server dropped the holder's entry (not renewed in time): another member takes the partition.
        await jsm.streams.purge(leaseStream(settings), { filter: subject });
        expect(await other.acquire()).toBe('unclean');
        expect(await holder.renew()).toBe(false);
        expect(holder.holds()).toBe(false);
      } finally {
        await connection.close();
      }
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

    it('refuses a partition count that is not a power of two up to 64, and a lease under 2 s', () => {
      expect(() => new NatsTransport({ partitions: 6 })).toThrow(/partitions.*power of two/);
      expect(() => new NatsTransport({ partitions: 128 })).toThrow(/partitions/);
      // A lease too short to hold a 1 s pull after a renewal.
      expect(() => new NatsTransport({ partitionLease: '1500ms' })).toThrow(
        /partitionLease.*at least 2000ms/,
      );
    });
  },
);
