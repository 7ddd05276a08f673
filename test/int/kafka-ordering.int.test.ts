// Per-key ordered consumption over Kafka: records of one ordering key share a partition, and each
// member runs them through an ordering gate (retries in place, commits never past an unfinished
// record). Several members (transports of their own, as separate processes would have), their
// connections dropped and one member closed mid-run (a rebalance).
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KafkaTransport } from 'oncemq/kafka';
import { findKafka } from '../support/brokers.js';
import { deleteTopics, proxiedKafka, type ProxiedKafka } from '../support/kafka.js';
import { runOrderedScenario } from '../support/ordered-orders.js';
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
  const member = (): KafkaTransport => {
    const transport = new KafkaTransport({
      prefix: proxied.prefix,
      partitions: 4,
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
});
