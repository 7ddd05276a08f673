// Per-key ordered consumption over Kafka: records of one ordering key share a partition, and each
// member runs them through an ordering gate (retries in place, commits never past an unfinished
// record). Several members (transports of their own, as separate processes would have), their
// connections dropped and one member closed mid-run (a rebalance).
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KafkaTransport } from 'oncemq/kafka';
import { findKafka } from '../support/brokers.js';
import { sleep, waitFor } from '../support/internal.js';
import { deleteTopics, kafkaAdmin, proxiedKafka, type ProxiedKafka } from '../support/kafka.js';
import { orderSteps, runOrderedScenario, type OrderSteps } from '../support/ordered-orders.js';
import { findPostgres } from '../support/postgres.js';

const kafka = await findKafka();
const postgres = await findPostgres();

describe.skipIf(!kafka.available || !postgres.available)('per-key ordered consumption over Kafka', () => {
  let proxied: ProxiedKafka;
  let topic: string;
  const members: KafkaTransport[] = [];

  beforeEach(async () => {
    proxied = await proxiedKafka(kafka.bootstrap, { partitions: 4 });
    topic = `orders-${randomUUID().slice(0, 8)}`;
  });

  afterEach(async () => {
    await Promise.all(members.splice(0).map((member) => member.close()));
    await proxied.close();
    await deleteTopics(kafka.bootstrap, [topic]).catch(() => undefined);
  });

  /** Another member's transport: same prefix, through the same proxy. */
  const member = (partitions = 4): KafkaTransport => {
    const transport = new KafkaTransport({
      prefix: proxied.prefix,
      partitions,
      failureBackoff: '200ms',
      retryDiscoveryInterval: '500ms',
      brokers: [`127.0.0.1:${proxied.proxy.port}`],
      brokerAddresses: { [kafka.bootstrap]: `127.0.0.1:${proxied.proxy.port}` },
    });
    members.push(transport);
    return transport;
  };

  it('applies create → pay → ship in order for every order, once, across members, a rebalance, drops and a poison', async () => {
    const group = `fulfilment-${randomUUID().slice(0, 8)}`;
    const opened: KafkaTransport[] = [];
    const result = await runOrderedScenario(
      {
        topic,
        group,
        publish: (message) => proxied.transport.publish(message),
        subscribe: (index, processor) => {
          opened[index] ??= member();
          return opened[index].subscribe(group, [topic], processor, {
            ordering: {},
            concurrency: 8,
          });
        },
        dropConnections: () => proxied.dropConnections(),
        deadLetters: () => proxied.transport.deadLetters.list({ group }),
      },
      { postgresUrl: postgres.url, orders: 600, limitMs: 150_000 },
    );
    expect(result.effects).toBe(1799);
  }, 240_000);

  describe('a grown topic', () => {
    const orders = 150;
    let steps: OrderSteps;
    let group: string;

    beforeEach(async () => {
      group = `fulfilment-${randomUUID().slice(0, 8)}`;
      steps = await orderSteps(postgres.url, group, 2);
    });

    afterEach(async () => {
      await steps.close();
    });

    const publishStep = async (transport: KafkaTransport, step: number): Promise<void> => {
      await Promise.all(
        Array.from({ length: orders }, (_, i) => transport.publish(steps.message(topic, `order-${i}`, step))),
      );
    };

    /** The topic created with 2 partitions, consumed in order once (the count recorded), then grown to `count`. */
    const grownAfter = async (publish: (two: KafkaTransport) => Promise<void>, count = 4): Promise<void> => {
      const two = member(2);
      const first = await two.subscribe(group, [topic], steps.pipeline, { ordering: {} });
      await first.close();
      await publish(two);
      const admin = kafkaAdmin(kafka.bootstrap);
      try {
        // `null`: the broker places the new partitions itself.
        await admin.createPartitions({ topics: [{ name: topic, count, assignments: null }] });
        await waitFor(
          async () =>
            (await admin.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic)?.partitions
              .length === count,
          'the new partitions',
          20_000,
        );
      } finally {
        await admin.close();
      }
    };

    const allApplied = async (): Promise<void> => {
      await waitFor(async () => (await steps.count()) >= orders * 3, `${orders * 3} effects`, 90_000);
      await sleep(1_000);
      expect((await steps.wrong(3)).slice(0, 5)).toEqual([]);
      expect(await steps.count()).toBe(orders * 3);
    };

    it('lets several members drain together', async () => {
      await grownAfter(async (two) => {
        await publishStep(two, 1);
        await publishStep(two, 2);
      });
      await publishStep(member(), 3);
      const drainers = await Promise.all(
        [member(), member()].map((transport) =>
          transport.subscribe(group, [topic], steps.pipeline, {
            ordering: { onPartitionChange: 'drain' },
            concurrency: 8,
          }),
        ),
      );
      await allApplied();
      await Promise.all(drainers.map((drainer) => drainer.close()));
    }, 150_000);

    it('holds the records published after the change until the whole group drained, when keys move between members', async () => {
      // Slow steps: the old partitions take seconds to drain, so the last steps arrive while the
      // first two of their order still wait in another member.
      await steps.close();
      steps = await orderSteps(postgres.url, group, 40);
      // 2 → 3 partitions: murmur2 modulo 3 sends keys of both old partitions to every partition. Three
      // members, one partition each: the new partition's owner has nothing to drain, and every key
      // there changed member (2 → 4 keeps a key of partition p in p or p + 2, which one member may own).
      await grownAfter(async (two) => {
        await publishStep(two, 1);
        await publishStep(two, 2);
      }, 3);
      const drainers = await Promise.all(
        [member(3), member(3), member(3)].map((transport) =>
          transport.subscribe(group, [topic], steps.pipeline, {
            ordering: { onPartitionChange: 'drain' },
            concurrency: 2,
          }),
        ),
      );
      // Published after the draining members started, by a producer that knows the new count.
      await publishStep(member(3), 3);
      expect(await steps.count()).toBeLessThan(orders * 2);
      await allApplied();
      await Promise.all(drainers.map((drainer) => drainer.close()));
    }, 150_000);
  });
});
