import { describe } from 'vitest';
import { describeTransportConformance } from 'oncemq/conformance';
import { findKafka } from '../support/brokers.js';
import { proxiedKafka } from '../support/kafka.js';
import { kafkaForeign } from '../support/foreign.js';

const kafka = await findKafka();

describe.skipIf(!kafka.available)('Kafka transport', () => {
  describeTransportConformance(
    'kafka',
    async () => {
      const proxied = await proxiedKafka(kafka.bootstrap);
      const foreign = kafkaForeign(kafka.bootstrap);
      return {
        transport: proxied.transport,
        foreign,
        dropConnections: () => proxied.dropConnections(),
        // The group's own topics go with the prefix; the suite's topics stay (another run may share the
        // broker and its `conformance-` names, so nothing is deleted by a pattern broader than this run's).
        cleanup: async () => {
          await foreign.close();
          await proxied.close();
        },
      };
    },
    { waitMs: 30_000 },
  );
});
