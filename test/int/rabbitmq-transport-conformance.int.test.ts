import { describe, it } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
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
        // Another process of the application: its own connection (through the same proxy), the same prefix.
        peer: () => Promise.resolve(world.open()),
        cleanup: () => world.cleanup(),
      };
    },
    { subscribe: { visibility: 1000 } },
  );
} else {
  describe('transport conformance: rabbitmq', () => {
    it.skip(service.reason, () => undefined);
  });
}
