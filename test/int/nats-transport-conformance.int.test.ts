import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { NATS_SERVICE, natsUnderTest } from '../support/nats.js';
import { findService } from '../support/services.js';
import { natsForeign } from '../support/foreign.js';

const service = await findService(NATS_SERVICE);

describe.skipIf(!service.available)('NatsTransport', () => {
  describeTransportConformance(
    'nats',
    async () => {
      const under = await natsUnderTest(service.url);
      const foreign = natsForeign(service.url, under.subjectPrefix);
      return {
        ...under,
        foreign,
        cleanup: async () => {
          await foreign.close();
          await under.cleanup();
        },
      };
    },
    {
      // A copy whose ack was dropped with its connection comes back after the ack wait.
      subscribe: { visibility: '2s' },
    },
  );
});
