import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findKafka } from '../support/brokers.js';
import { deleteTopics, proxiedKafka } from '../support/kafka.js';

const kafka = await findKafka();

describe.skipIf(!kafka.available)('Kafka transport', () => {
  describeTransportConformance(
    'kafka',
    async () => {
      const proxied = await proxiedKafka(kafka.bootstrap);
      return {
        transport: proxied.transport,
        dropConnections: () => proxied.dropConnections(),
        cleanup: async () => {
          await proxied.close();
          await deleteTopics(kafka.bootstrap, ['conformance-']).catch(() => undefined);
        },
      };
    },
    { waitMs: 30_000 },
  );
});
