import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { JETSTREAM_MAX_HEADER_BYTES } from 'oncemq/nats';
import { NATS_SERVICE, natsUnderTest, serverMaxPayload } from '../support/nats.js';
import { findService } from '../support/services.js';

const service = await findService(NATS_SERVICE);

/** The server's `max_payload` (headers and body): the dead-letter stream has no smaller limit. */
const maxMessageBytes = service.available ? await serverMaxPayload(service.url) : undefined;

describe.skipIf(!service.available)('NatsTransport', () => {
  describeTransportConformance(
    'nats',
    async () => ({
      ...(await natsUnderTest(service.url)),
      maxMessageBytes,
      maxHeaderBytes: JETSTREAM_MAX_HEADER_BYTES,
    }),
    {
      // A copy whose ack was dropped with its connection comes back after the ack wait.
      subscribe: { visibility: '2s' },
    },
  );
});
