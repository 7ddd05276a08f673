import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findRocketMQ } from '../support/brokers.js';
import { rocketmqUnderTest } from '../support/rocketmq.js';
import { rocketmqForeign } from '../support/foreign.js';
import { parseRocketMQUrl, ROCKETMQ_MAX_PROPERTY_BYTES } from '../support/internal.js';

const broker = await findRocketMQ();

describe.skipIf(!broker.available)('RocketMQTransport', () => {
  describeTransportConformance(
    'rocketmq',
    async () => {
      const under = await rocketmqUnderTest(broker.url);
      const foreign = rocketmqForeign(parseRocketMQUrl(broker.url).endpoints);
      return {
        ...under,
        foreign,
        // The proxy's default limit of a message's properties. Its 4 MiB limit counts the body alone, and a
        // dead letter's body is the original's: the body case does not apply.
        maxHeaderBytes: ROCKETMQ_MAX_PROPERTY_BYTES,
        cleanup: () => foreign.close(),
      };
    },
    {
      // RocketMQ counts invisibility in seconds: a retry's delay is rounded up to the next second.
      retryDelayMs: 1000,
      subscribe: { visibility: '2s' },
      waitMs: 30_000,
    },
  );
});
