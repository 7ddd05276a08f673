import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { NATS_SERVICE, natsUnderTest } from '../support/nats.js';
import { findService } from '../support/services.js';

const service = await findService(NATS_SERVICE);

describe.skipIf(!service.available)('NatsTransport', () => {
  describeTransportConformance('nats', () => natsUnderTest(service.url), {
    // A copy whose ack was dropped with its connection comes back after the ack wait.
    subscribe: { visibility: '2s' },
  });
});
