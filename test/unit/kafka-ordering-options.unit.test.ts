import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { KafkaTransport } from 'oncemq/kafka';

describe('Kafka ordering options', () => {
  it('refuses bad ordering options at subscribe, before connecting', async () => {
    const transport = new KafkaTransport({ brokers: ['127.0.0.1:1'] });
    const subscribing = transport.subscribe('g', ['t'], () => Promise.reject(new Error('unused')), {
      ordering: { onExhausted: 'park' as 'block' },
    });
    await expect(subscribing).rejects.toThrow(ConfigError);
    await expect(subscribing).rejects.toThrow(/ordering\.onExhausted/);
    await transport.close();
  });
});
