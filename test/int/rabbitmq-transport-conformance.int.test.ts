import { describe, it } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { AMQP_MAX_HEADER_BYTES } from 'oncemq/rabbitmq';
import { findRabbit, rabbitWorld } from '../support/rabbitmq.js';

const service = await findRabbit();

if (service.available) {
  describeTransportConformance(
    'rabbitmq',
    async () => {
      const world = await rabbitWorld(service.url);
      return {
        transport: world.transport,
        // Through the proxy: the shared broker never notices, the client sees its connection reset.
        dropConnections: () => {
          world.proxy.dropConnections();
          return Promise.resolve();
        },
        cleanup: () => world.cleanup(),
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
