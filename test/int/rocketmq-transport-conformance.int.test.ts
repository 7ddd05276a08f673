import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findRocketMQ } from '../support/brokers.js';
import { rocketmqUnderTest } from '../support/rocketmq.js';
import { rocketmqForeign } from '../support/foreign.js';
import { parseRocketMQUrl } from 'oncemq/rocketmq';

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
