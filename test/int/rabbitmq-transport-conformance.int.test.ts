import { describe, it } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { DEFAULT_RABBIT_TRANSPORT_CONFIG } from 'oncemq/rabbitmq';
import { findRabbit, rabbitWorld, scratchPrefix } from '../support/rabbitmq.js';
import { rabbitForeign } from '../support/foreign.js';
import { AMQP_MAX_HEADER_BYTES } from '../support/internal.js';

const service = await findRabbit();

if (service.available) {
  describeTransportConformance(
    'rabbitmq',
    async () => {
      const world = await rabbitWorld(service.url);
      const foreign = rabbitForeign(service.url, world.prefix);
      return {
        transport: world.transport,
        foreign,
        // Through the proxy: the shared broker never notices, the client sees its connection reset.
        dropConnections: () => {
          world.proxy.dropConnections();
          return Promise.resolve();
        },
        // Another process of the application: its own connection (through the same proxy), the same prefix.
        peer: () => Promise.resolve(world.open()),
        // Another application on the broker: a prefix of its own, and nothing else set (no exchange).
        otherNamespace: () => Promise.resolve(world.open({ prefix: scratchPrefix() })),
        // Another process of the application configured with another `partitions`.
        partitionCounts: {
          count: DEFAULT_RABBIT_TRANSPORT_CONFIG.partitions,
          member: (_topic, partitions) => Promise.resolve(world.open({ partitions })),
        },
        cleanup: async () => {
          await foreign.close();
          await world.cleanup();
        },
        // Headers travel in one table amqplib encodes in 64 KiB; the server's max_message_size (128 MiB) is too large to test.
        maxHeaderBytes: AMQP_MAX_HEADER_BYTES,
      };
    },
    { subscribe: { visibility: 1000 } },
  );
} else {
  describe('transport conformance: rabbitmq', () => {
    it.skip(service.reason, () => undefined);
  });
}
