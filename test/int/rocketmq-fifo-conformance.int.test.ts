import { describe, vi } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findRocketMQ } from '../support/brokers.js';
import { rocketmqUnderTest } from '../support/rocketmq.js';

// RocketMQ redelivers a retry no sooner than a whole second after it is due, and a FIFO group waits
// for its head: the suite's retry and dead-letter cases need more than the default 30 s here.
vi.setConfig({ testTimeout: 90_000 });

const broker = await findRocketMQ();

// The same suite on FIFO topics and orderly groups: the ordering cases run, and every other case holds there too.
describe.skipIf(!broker.available)('RocketMQTransport with FIFO topics', () => {
  describeTransportConformance('rocketmq (fifo)', () => rocketmqUnderTest(broker.url, { fifo: true }), {
    retryDelayMs: 1000,
    subscribe: { visibility: '2s' },
    waitMs: 30_000,
  });
});
