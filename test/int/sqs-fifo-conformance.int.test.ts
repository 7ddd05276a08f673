import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findElasticMQ } from '../support/brokers.js';
import { sqsUnderTest } from '../support/sqs.js';

const broker = await findElasticMQ();

// The same suite on FIFO group queues: the ordering cases run, and every other case holds there too.
describe.skipIf(!broker.available)('SqsTransport with FIFO queues', () => {
  describeTransportConformance('sqs (fifo)', () => sqsUnderTest(broker.url, { fifo: true }), {
    retryDelayMs: 1000,
    subscribe: { visibility: '2s' },
    waitMs: 30_000,
  });
});
