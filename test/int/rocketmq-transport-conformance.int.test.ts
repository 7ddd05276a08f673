import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findRocketMQ } from '../support/brokers.js';
import { rocketmqUnderTest } from '../support/rocketmq.js';

const broker = await findRocketMQ();

describe.skipIf(!broker.available)('RocketMQTransport', () => {
  describeTransportConformance('rocketmq', () => rocketmqUnderTest(broker.url), {
    // RocketMQ counts invisibility in seconds: a retry's delay is rounded up to the next second.
    retryDelayMs: 1000,
    subscribe: { visibility: '2s' },
    waitMs: 30_000,
  });
});
