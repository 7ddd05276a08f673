import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findElasticMQ } from '../support/brokers.js';
import { sqsUnderTest } from '../support/sqs.js';

const broker = await findElasticMQ();

// Standard queues on ElasticMQ: a topic's log queue and a queue per group.
describe.skipIf(!broker.available)('SqsTransport with standard queues', () => {
  describeTransportConformance('sqs', () => sqsUnderTest(broker.url), {
    retryDelayMs: 1000,
    subscribe: { visibility: '2s' },
    waitMs: 30_000,
  });
});
