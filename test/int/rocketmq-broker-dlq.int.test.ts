import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from 'oncemq';
import { RocketMQTransport, type RocketMQTransportConfig } from 'oncemq/rocketmq';
import { findRocketMQ } from '../support/brokers.js';
import { waitUntil } from '../support/local-points.js';
import { QUICK_ROCKETMQ } from '../support/rocketmq.js';

const broker = await findRocketMQ();

/**
 * The broker's own dead-lettering, in a file of its own: no proxy in the path (the pitfall file's
 * clients reconnect to their closed proxies for as long as their worker lives).
 */
describe.skipIf(!broker.available)('RocketMQ dead letters made by the broker itself', () => {
  const transports: RocketMQTransport[] = [];
  const id = (): string => randomUUID().slice(0, 8);

  const open = (config: RocketMQTransportConfig = {}): RocketMQTransport => {
    const transport = new RocketMQTransport({ url: broker.url, ...QUICK_ROCKETMQ, ...config });
    transports.push(transport);
    return transport;
  };

  afterEach(async () => {
    await Promise.all(transports.splice(0).map((transport) => transport.close()));
  });

  it('the broker moves a message to %DLQ%<group> on its own after retryMaxTimes; it is listed (no reason travels) and replayed', async () => {
    const topic = `gave-up-${id()}`;
    const group = `points-${id()}`;
    const transport = open({ retryMaxTimes: 1 });
    let healed = false;
    const seen: Envelope[] = [];
    await transport.subscribe(group, [topic], {
      process: (envelope) => {
        seen.push(envelope);
        if (!healed) return Promise.reject(new Error('the processor is down'));
        return Promise.resolve({
          kind: 'executed',
          action: 'ack',
          mode: 'transactional',
          attempt: 1,
          reclaimed: false,
          leaseLost: false,
          group,
          key: envelope.headers['oncemq-key'] ?? null,
          topic: envelope.topic,
          brokerId: envelope.brokerId,
          deliveryCount: envelope.deliveryCount,
          elapsedMs: 0,
        });
      },
    });
    await transport.publish({ topic, key: 'stuck', body: { n: 1 } });
    await waitUntil(
      async () => (await transport.deadLetters.list({ group })).length === 1,
      'the broker’s dead letter',
      60_000,
    );
    expect(seen.map((envelope) => envelope.brokerDeliveryCount)).toEqual([1, 2]);
    const [letter] = await transport.deadLetters.list({ group });
    expect(letter).toMatchObject({ key: 'stuck', reason: 'max-deliveries', group, topic, deliveryCount: 2 });
    healed = true;
    expect(await transport.deadLetters.replay(group, [letter?.id ?? ''])).toBe(1);
    await waitUntil(() => seen.length === 3, 'the replayed copy', 30_000);
    expect(seen[2]).toMatchObject({ deliveryCount: 1 });
    expect(await transport.deadLetters.list({ group })).toEqual([]);
  });
});
