import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { KafkaTransport } from 'oncemq/kafka';
import { RocketMQTransport } from 'oncemq/rocketmq';
import type { Envelope } from 'oncemq';
import {
  rabbitSettings,
  resolveRocketMQSettings,
  startPosition,
  TransportNamespace,
} from '../support/internal.js';

describe('namespaces', () => {
  it('names topics and groups at the broker with the namespace first, and gives the application its own names back', () => {
    const kafka = new TransportNamespace('app-a', '.');
    expect(kafka.toBroker('orders')).toBe('app-a.orders');
    expect(kafka.fromBroker('app-a.orders')).toBe('orders');
    // A name outside the namespace is left as it is.
    expect(kafka.fromBroker('other.orders')).toBe('other.orders');
    const none = new TransportNamespace(undefined, '.');
    expect([none.toBroker('orders'), none.fromBroker('x.orders')]).toEqual(['orders', 'x.orders']);
  });

  it('hands the processor envelopes with the application’s topic, one by one and in batches', async () => {
    const names = new TransportNamespace('app-a', '|');
    const seen: string[] = [];
    const processor = names.processor({
      process: (envelope) => (seen.push(envelope.topic), Promise.reject(new Error('seen'))),
      processBatch: (envelopes) => (seen.push(...envelopes.map((e) => e.topic)), Promise.resolve([])),
    });
    const envelope = { topic: 'app-a|orders', brokerId: 'b', headers: {}, body: new Uint8Array() };
    await processor.process(envelope as unknown as Envelope).catch(() => undefined);
    await processor.processBatch?.([envelope as unknown as Envelope]);
    expect(seen).toEqual(['orders', 'orders']);
  });

  it('refuses a namespace that cannot start a broker name, naming the field', async () => {
    expect(() => new KafkaTransport({ brokers: ['127.0.0.1:1'], namespace: 'a.b' })).toThrow(ConfigError);
    expect(() => new RocketMQTransport({ namespace: 'a%b' })).toThrow(/^namespace/);
    await new KafkaTransport({ brokers: ['127.0.0.1:1'], namespace: 'app-a' }).close();
  });

  it('takes a RocketMQ namespace from the url unless the config names one, and joins it with |', () => {
    const fromUrl = resolveRocketMQSettings({ url: 'rocketmq://127.0.0.1:8081?namespace=prod' });
    expect(fromUrl.names.toBroker('orders')).toBe('prod|orders');
    const configured = resolveRocketMQSettings({
      url: 'rocketmq://h:8081?namespace=prod',
      namespace: 'test',
    });
    expect(configured.names.toBroker('orders')).toBe('test|orders');
    expect(resolveRocketMQSettings({}).names.toBroker('orders')).toBe('orders');
  });

  it('publishes to a RabbitMQ exchange named after the prefix unless one is set: two prefixes share no exchange', () => {
    expect(rabbitSettings({}).exchange).toBe('oncemq');
    expect(rabbitSettings({ prefix: 'app-a' }).exchange).toBe('app-a');
    expect(rabbitSettings({ prefix: 'app-a', exchange: 'shared' }).exchange).toBe('shared');
    expect(() => rabbitSettings({ prefix: 'amq.x' })).toThrow(/^prefix/);
  });
});

describe('start positions', () => {
  it("reads `from`: 'earliest' unless the transport cannot start there, then 'now'; anything else refused", () => {
    expect(startPosition({})).toBe('earliest');
    expect(startPosition(undefined)).toBe('earliest');
    expect(startPosition({ from: 'now' })).toBe('now');
    expect(startPosition({}, 'no log')).toBe('now');
    expect(startPosition({ from: 'now' }, 'no log')).toBe('now');
    expect(() => startPosition({ from: 'earliest' }, 'no log')).toThrow(
      "from: no log; subscribe with from: 'now'",
    );
    expect(() => startPosition({ from: 'first' as 'now' })).toThrow(ConfigError);
  });
});
