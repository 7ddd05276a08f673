import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { KafkaTransport } from 'oncemq/kafka';

describe('Kafka transport configuration', () => {
  it('refuses a fetch size that is not a whole number of bytes from 1 KiB to 2 GiB, naming the field', async () => {
    for (const fetchMaxBytes of [0, 1023, 1.5, 2 ** 31, Number.NaN]) {
      expect(
        () => new KafkaTransport({ brokers: ['127.0.0.1:1'], fetchMaxBytes }),
        String(fetchMaxBytes),
      ).toThrow(ConfigError);
      expect(() => new KafkaTransport({ brokers: ['127.0.0.1:1'], fetchMaxBytes })).toThrow(/fetchMaxBytes/);
    }
    await new KafkaTransport({ brokers: ['127.0.0.1:1'], fetchMaxBytes: 1024 }).close();
  });
});
