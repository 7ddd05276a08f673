import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { KafkaTransport } from 'oncemq/kafka';
import { LocalBroker } from 'oncemq/local';
import { NatsTransport } from 'oncemq/nats';
import { RabbitTransport } from 'oncemq/rabbitmq';
import { RedisStreamsTransport } from 'oncemq/redis-streams';
import { RocketMQTransport } from 'oncemq/rocketmq';
import { SqsTransport } from 'oncemq/sqs';

/** Each transport's constructor, given a config as plain JavaScript would pass it. */
const TRANSPORTS: Record<string, { make: (config: unknown) => unknown; field: string }> = {
  kafka: { make: (config) => new KafkaTransport(config as never), field: 'url' },
  local: { make: (config) => new LocalBroker(config as never), field: 'config' },
  nats: { make: (config) => new NatsTransport(config as never), field: 'config' },
  rabbitmq: { make: (config) => new RabbitTransport(config as never), field: 'config' },
  'redis-streams': { make: (config) => new RedisStreamsTransport(config as never), field: 'client' },
  rocketmq: { make: (config) => new RocketMQTransport(config as never), field: 'config' },
  sqs: { make: (config) => new SqsTransport(config as never), field: 'config' },
};

describe('a transport constructor given a config that is not an object', () => {
  for (const [name, { make, field }] of Object.entries(TRANSPORTS)) {
    it(`${name}: refuses null, a string and a number with a ConfigError naming what to pass`, () => {
      for (const [config, got] of [
        [null, 'null'],
        ['amqp://localhost', 'string'],
        [5, 'number'],
      ] as const) {
        let thrown: unknown;
        try {
          make(config);
        } catch (error) {
          thrown = error;
        }
        expect(thrown).toBeInstanceOf(ConfigError);
        expect((thrown as ConfigError).field).toBe(field);
        expect((thrown as Error).message).toContain(`got ${got}`);
      }
    });
  }
});
