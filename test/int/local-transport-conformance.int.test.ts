import { join } from 'node:path';
import { DEFAULT_LOCAL_BROKER_CONFIG, LocalBroker, type LocalBrokerConfig } from 'oncemq/local';
import { describeTransportConformance } from 'oncemq/conformance';
import { scratchDir } from '../support/points.js';
import { LocalSubscription } from '../support/internal.js';

describeTransportConformance('local', () => {
  const scratch = scratchDir();
  const open = (file: string, config: LocalBrokerConfig = {}): LocalBroker =>
    new LocalBroker({
      path: join(scratch.dir, file),
      pollInterval: '2ms',
      heartbeatInterval: '50ms',
      sessionTimeout: '1s',
      ...config,
    });
  const transport = open('broker.db');
  return Promise.resolve({
    transport,
    // The local broker's namespace is its file: another application keeps a file of its own.
    otherNamespace: () => Promise.resolve(open('other.db')),
    // The local broker has no connection to lose: its members crash before committing offsets and rejoin.
    dropConnections: (subscriptions) => {
      for (const subscription of subscriptions) {
        if (subscription instanceof LocalSubscription) subscription.crash();
      }
      return Promise.resolve();
    },
    // The local broker's only producer is its own: another program writes what `publish` writes.
    foreign: {
      headerTypes: ['text'],
      repeatedHeaders: false,
      publish: async (topic, message) => {
        const headers: Record<string, string> = {};
        for (const [name, value] of message.headers) headers[name] = String(value.value);
        await transport.publish({ topic, body: message.body, headers });
      },
    },
    // Another process on the same file configured with another `queues`: a topic keeps its count.
    partitionCounts: {
      count: DEFAULT_LOCAL_BROKER_CONFIG.queues,
      member: (_topic, queues) => Promise.resolve(open('broker.db', { queues })),
      field: 'queues',
      fixed:
        'the local broker keeps a topic’s queue count for its life: another count is refused on an existing ' +
        'topic, with a drain too (checked by the refusal case)',
    },
    cleanup: scratch.remove,
  });
});
