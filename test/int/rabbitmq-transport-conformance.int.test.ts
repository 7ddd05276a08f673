import { describe, it } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findRabbit, rabbitWorld } from '../support/rabbitmq.js';
import { rabbitForeign } from '../support/foreign.js';

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
        cleanup: async () => {
          await foreign.close();
          await world.cleanup();
        },
      };
    },
    { subscribe: { visibility: 1000 } },
  );
} else {
  describe('transport conformance: rabbitmq', () => {
    it.skip(service.reason, () => undefined);
  });
}
