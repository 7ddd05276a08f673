import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { DEFAULT_NATS_TRANSPORT_CONFIG, NatsTransport } from 'oncemq/nats';
import {
  NATS_SERVICE,
  QUICK_NATS,
  deleteStreams,
  natsNamespace,
  natsUnderTest,
  serverMaxPayload,
} from '../support/nats.js';
import { findService } from '../support/services.js';
import { natsForeign } from '../support/foreign.js';
import { JETSTREAM_MAX_HEADER_BYTES } from '../support/internal.js';

const service = await findService(NATS_SERVICE);

/** The server's `max_payload` (headers and body): the dead-letter stream has no smaller limit. */
const maxMessageBytes = service.available ? await serverMaxPayload(service.url) : undefined;

describe.skipIf(!service.available)('NatsTransport', () => {
  describeTransportConformance(
    'nats',
    async () => {
      const under = await natsUnderTest(service.url);
      const foreign = natsForeign(service.url, under.subjectPrefix);
      const others: string[] = [];
      return {
        ...under,
        foreign,
        maxMessageBytes,
        maxHeaderBytes: JETSTREAM_MAX_HEADER_BYTES,
        // Another process of the application: its own connection, straight to the server, the same names.
        peer: () =>
          Promise.resolve(
            new NatsTransport({
              ...QUICK_NATS,
              streamPrefix: under.streamPrefix,
              subjectPrefix: under.subjectPrefix,
              servers: service.url,
            }),
          ),
        // Another application on the server: stream and subject prefixes of its own.
        otherNamespace: () => {
          const names = natsNamespace();
          others.push(names.streamPrefix);
          return Promise.resolve(new NatsTransport({ ...QUICK_NATS, ...names, servers: service.url }));
        },
        // Another process of the application configured with another `partitions`.
        partitionCounts: {
          count: DEFAULT_NATS_TRANSPORT_CONFIG.partitions,
          member: (_topic, partitions) =>
            Promise.resolve(
              new NatsTransport({
                ...QUICK_NATS,
                streamPrefix: under.streamPrefix,
                subjectPrefix: under.subjectPrefix,
                servers: service.url,
                partitions,
              }),
            ),
        },
        cleanup: async () => {
          await foreign.close();
          await under.cleanup();
          for (const prefix of others) await deleteStreams(service.url, prefix);
        },
      };
    },
    {
      // A copy whose ack was dropped with its connection comes back after the ack wait.
      subscribe: { visibility: '2s' },
    },
  );
});
