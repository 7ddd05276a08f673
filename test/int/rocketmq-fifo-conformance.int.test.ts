import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findRocketMQ } from '../support/brokers.js';
import { rocketmqUnderTest } from '../support/rocketmq.js';

const broker = await findRocketMQ();

// The same suite on FIFO topics and orderly groups: the ordering cases run, and every other case holds there too.
describe.skipIf(!broker.available)('RocketMQTransport with FIFO topics', () => {
  describeTransportConformance('rocketmq (fifo)', () => rocketmqUnderTest(broker.url, { fifo: true }), {
    retryDelayMs: 1000,
    subscribe: { visibility: '2s' },
    waitMs: 30_000,
  });
});
