import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { KafkaTransport } from 'oncemq/kafka';
import { DEFAULT_KAFKA_TRANSPORT_CONFIG } from 'oncemq/kafka';
import { findKafka } from '../support/brokers.js';
import { randomUUID } from 'node:crypto';
import { deleteTopics, kafkaAdmin, proxiedKafka } from '../support/kafka.js';
import { waitUntil } from '../support/local-points.js';
import { kafkaForeign } from '../support/foreign.js';

const kafka = await findKafka();

/** Grows `topic` to `count` partitions (Kafka only adds partitions), and waits until the broker says so. */
async function growTopic(topic: string, count: number): Promise<void> {
  const admin = kafkaAdmin(kafka.bootstrap);
  const partitions = async (): Promise<number> =>
    (await admin.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic)?.partitions.length ?? 0;
  try {
    if ((await partitions()) >= count) return;
    // `null`: the broker places the new partitions itself.
    await admin.createPartitions({ topics: [{ name: topic, count, assignments: null }] });
    await waitUntil(async () => (await partitions()) === count, 'the new partitions');
  } finally {
    await admin.close();
  }
}

describe.skipIf(!kafka.available)('Kafka transport', () => {
  describeTransportConformance(
    'kafka',
    async () => {
      const proxied = await proxiedKafka(kafka.bootstrap);
      const foreign = kafkaForeign(kafka.bootstrap);
      const others: string[] = [];
      return {
        transport: proxied.transport,
        foreign,
        dropConnections: () => proxied.dropConnections(),
        // Another process of the application: its own clients, straight to the broker, the same prefix.
        peer: () =>
          Promise.resolve(
            new KafkaTransport({
              brokers: [kafka.bootstrap],
              prefix: proxied.prefix,
              failureBackoff: '200ms',
            }),
          ),
        // The group's own topics go with the prefix; the suite's topics stay (another run may share the
        // broker and its `conformance-` names, so nothing is deleted by a pattern broader than this run's).
        // Another application on the cluster: a namespace of its own, the group-topic prefix left as it is.
        otherNamespace: () => {
          const namespace = `ns-${randomUUID().slice(0, 8)}`;
          others.push(`${namespace}.`, `oncemq.${namespace}.`);
          return Promise.resolve(
            new KafkaTransport({
              brokers: [kafka.bootstrap],
              namespace,
              failureBackoff: '200ms',
              retryDiscoveryInterval: '500ms',
            }),
          );
        },
        // The count is the topic's own: it grows, and a fresh member (another process) reads it.
        partitionCounts: {
          count: DEFAULT_KAFKA_TRANSPORT_CONFIG.partitions,
          member: async (topic, partitions) => {
            await growTopic(topic, partitions);
            return new KafkaTransport({
              brokers: [kafka.bootstrap],
              prefix: proxied.prefix,
              failureBackoff: '200ms',
              retryDiscoveryInterval: '500ms',
              partitions,
            });
          },
          field: 'ordering.onPartitionChange',
          reversible: false,
        },
        cleanup: async () => {
          await foreign.close();
          await proxied.close();
          if (others.length > 0) await deleteTopics(kafka.bootstrap, others).catch(() => undefined);
        },
        // The topics' max.message.bytes (Kafka's default; the transport's maxMessageBytes): headers count in it too.
        maxMessageBytes: DEFAULT_KAFKA_TRANSPORT_CONFIG.maxMessageBytes,
      };
    },
    { waitMs: 30_000 },
  );
});
