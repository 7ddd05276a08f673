// Kafka pitfalls of topics, streams and publishing: members racing to create a topic, a topic the broker
// refuses, a message stream whose consumer closes as it is made, records batched per request under
// 512 KiB, the business key kept apart from another producer's record key, and headers that are not text.
import { subscribe as listen, unsubscribe as stopListening } from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { Consumer, Producer, type Message } from '@platformatic/kafka';
import { TransportUnavailableError, type Envelope, type Outcome, type PublishReceipt } from 'oncemq';
import { KafkaTransport } from 'oncemq/kafka';
import type { ProxiedKafka } from '../support/kafka.js';
import { kafka, kafkaPitfallScope } from '../support/kafka-pitfalls.js';
import { ackOutcome, waitUntil } from '../support/local-points.js';
import {
  createAdmin,
  errorText,
  KafkaTopology,
  loadKafkaDriver,
  openRecordStream,
  resolveKafkaSettings,
} from '../support/internal.js';

describe.skipIf(!kafka.available)('Kafka pitfalls', () => {
  let proxied: ProxiedKafka;
  let topic: string;
  let group: string;
  const { subscriptions } = kafkaPitfallScope((place) => {
    ({ proxied, topic, group } = place);
  });

  it('four members of a new group subscribing at once all join: the topic they race to create exists for all', async () => {
    // Separate transports, as separate processes would be: each creates the topics it finds missing.
    const members = [
      proxied.transport,
      ...[1, 2, 3].map(
        () =>
          new KafkaTransport({ brokers: [kafka.bootstrap], prefix: proxied.prefix, failureBackoff: '200ms' }),
      ),
    ];
    const seen = new Set<string>();
    const processor = (envelope: Envelope): Promise<Outcome> => {
      seen.add(envelope.brokerId);
      return Promise.resolve(ackOutcome(envelope));
    };
    try {
      const joined = await Promise.allSettled(
        members.map((member) => member.subscribe(group, [topic], processor, { concurrency: 4 })),
      );
      for (const result of joined) if (result.status === 'fulfilled') subscriptions.push(result.value);
      expect(
        joined.map((result) => (result.status === 'rejected' ? errorText(result.reason) : 'joined')),
      ).toEqual(['joined', 'joined', 'joined', 'joined']);
      const receipts: PublishReceipt[] = [];
      for (let i = 0; i < 20; i++)
        receipts.push(await proxied.transport.publish({ topic, key: `m-${i}`, body: {} }));
      await waitUntil(
        () => receipts.every((receipt) => seen.has(receipt.brokerId)),
        'every record delivered',
      );
    } finally {
      await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
      await Promise.all(members.slice(1).map((member) => member.close()));
    }
  }, 60_000);

  it('a topic the broker refuses to create is a TransportUnavailableError naming the broker’s reason', async () => {
    const settings = resolveKafkaSettings({ brokers: [kafka.bootstrap], timeout: '2s' });
    const admin = createAdmin(await loadKafkaDriver(), settings);
    try {
      // The transport checks names before it gets here; the broker's own refusal is what is tested.
      const refused = new KafkaTopology(admin, settings).ensure('not a topic name!');
      await expect(refused).rejects.toBeInstanceOf(TransportUnavailableError);
      await expect(refused).rejects.toThrow(
        /kafka: cannot create topic 'not a topic name!': .*\(INVALID_TOPIC_EXCEPTION: /,
      );
    } finally {
      await admin.close();
    }
  });

  it('a message stream whose consumer closes as the stream is made fails to its listener, not to the process', async () => {
    await proxied.transport.publish({ topic, key: 'k', body: {} });
    const consumer = new Consumer({
      clientId: 'oncemq-test',
      bootstrapBrokers: [kafka.bootstrap],
      groupId: group,
    });
    // Closed in the turn the group is joined, before the client makes the stream and starts it.
    consumer.once('consumer:group:join', () => void consumer.close());
    const failures: Error[] = [];
    const stream = await openRecordStream(
      consumer,
      { topics: [topic], mode: 'earliest', autocommit: false, maxWaitTime: 100 },
      (_stream, error) => failures.push(error),
    );
    await waitUntil(() => failures.length > 0, 'the stream to report its failure');
    expect(failures[0]?.message).toContain('closed');
    await stream.close().catch(() => undefined);
    await consumer.close().catch(() => undefined);
  });

  it('sends the records published while a request is out in one request, each receipt naming its own record', async () => {
    const { transport } = proxied;
    await transport.publish({ topic, key: 'first', body: {} }); // the topic exists
    const requests: number[] = [];
    const onSend = (context: unknown): void => {
      const messages = (context as { options?: { messages?: unknown[] } }).options?.messages;
      requests.push(messages?.length ?? 0);
    };
    listen('tracing:plt:kafka:producer:sends:start', onSend);
    let receipts: PublishReceipt[];
    try {
      receipts = await Promise.all(
        Array.from({ length: 700 }, (_, i) => transport.publish({ topic, key: `k-${i}`, body: { i } })),
      );
    } finally {
      stopListening('tracing:plt:kafka:producer:sends:start', onSend);
    }
    // 700 records sent in one turn: 500, then the other 200 (never more than 500 in one request).
    expect(requests).toEqual([500, 200]);
    const stored = new Map<string, string>(); // broker id → key, as the consumer reads them
    const subscription = await transport.subscribe(group, [topic], (envelope) => {
      stored.set(envelope.brokerId, envelope.headers['oncemq-key'] ?? '');
      return Promise.resolve(ackOutcome(envelope));
    });
    subscriptions.push(subscription);
    await waitUntil(() => stored.size === 701, 'every record read back');
    receipts.forEach((receipt, i) => expect(stored.get(receipt.brokerId)).toBe(`k-${i}`));
    expect(new Set(receipts.map((receipt) => receipt.position?.partition)).size).toBeGreaterThan(1);
  });

  it('keeps a request of large records under 512 KiB', async () => {
    const { transport } = proxied;
    await transport.publish({ topic, key: 'first', body: {} });
    const requests: number[] = [];
    const onSend = (context: unknown): void => {
      const messages = (context as { options?: { messages?: unknown[] } }).options?.messages;
      requests.push(messages?.length ?? 0);
    };
    listen('tracing:plt:kafka:producer:sends:start', onSend);
    try {
      const text = 'x'.repeat(100 * 1024);
      await Promise.all(
        Array.from({ length: 12 }, (_, i) => transport.publish({ topic, key: `k-${i}`, body: text })),
      );
    } finally {
      stopListening('tracing:plt:kafka:producer:sends:start', onSend);
    }
    expect(requests).toEqual([5, 5, 2]);
  });

  it('stores the business key as the record key alone, reads it back as oncemq-key, and never takes another producer’s record key for it', async () => {
    const { transport } = proxied;
    await transport.publish({ topic, key: 'pay-1', body: { n: 1 } });
    await transport.publish({ topic, key: 'pay-2', orderingKey: 'order-7', body: { n: 2 } });
    const producer = new Producer({ clientId: 'oncemq-test', bootstrapBrokers: [kafka.bootstrap] });
    try {
      await producer.send({
        messages: [{ topic, key: Buffer.from('customer-9'), value: Buffer.from('{"n":3}') }],
      });
    } finally {
      await producer.close();
    }
    // As stored: the first record's only key is its record key; the second keeps the business key in a header.
    const reader = new Consumer({
      clientId: 'oncemq-test',
      bootstrapBrokers: [kafka.bootstrap],
      groupId: group,
    });
    const stored: { key: string; headers: string[] }[] = [];
    const stream = await reader.consume({
      topics: [topic],
      mode: 'earliest',
      autocommit: false,
      maxWaitTime: 100,
    });
    stream.on('data', (record: Message) =>
      stored.push({
        key: record.key.toString(),
        headers: [...record.headers.keys()].map((name) => name.toString()).sort(),
      }),
    );
    await waitUntil(() => stored.length === 3, 'the three records read raw');
    await stream.close();
    await reader.close();
    expect(stored.find((record) => record.key === 'pay-1')?.headers).toEqual(['oncemq-unique-id']);
    expect(stored.find((record) => record.key === 'order-7')?.headers).toEqual([
      'oncemq-key',
      'oncemq-ordering-key',
      'oncemq-unique-id',
    ]);

    const keys = new Map<string, string | undefined>(); // body → the oncemq-key the consumer sees
    const subscription = await transport.subscribe(`${group}-read`, [topic], (envelope) => {
      keys.set(Buffer.from(envelope.body).toString(), envelope.headers['oncemq-key']);
      return Promise.resolve(ackOutcome(envelope));
    });
    subscriptions.push(subscription);
    await waitUntil(() => keys.size === 3, 'the three records consumed');
    expect(keys.get('{"n":1}')).toBe('pay-1');
    expect(keys.get('{"n":2}')).toBe('pay-2');
    expect(keys.has('{"n":3}')).toBe(true);
    expect(keys.get('{"n":3}')).toBeUndefined(); // another producer's record key is not a business key
  });

  it('fails a record with a header that is not text alone, with a ConfigError, and stores the records sent with it', async () => {
    const { transport } = proxied;
    await transport.publish({ topic, key: 'first', body: {} });
    const bad = { 'x-count': 3 } as unknown as Record<string, string>;
    const results = await Promise.allSettled([
      transport.publish({ topic, key: 'a', body: {} }),
      transport.publish({ topic, key: 'b', body: {}, headers: bad }),
      transport.publish({ topic, key: 'c', body: {} }),
    ]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const reason = (results[1] as PromiseRejectedResult).reason as Error;
    expect(reason.name).toBe('ConfigError');
    expect(reason.message).toContain("header 'x-count' must be text");
  });
});
