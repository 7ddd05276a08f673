import { join } from 'node:path';
import { LocalBroker } from 'oncemq/local';
import { LocalSubscription } from '../../src/transport/local/local-subscription.js';
import { describeTransportConformance } from 'oncemq/conformance';
import { scratchDir } from '../support/points.js';

describeTransportConformance('local', () => {
  const scratch = scratchDir();
  const open = (file: string): LocalBroker =>
    new LocalBroker({
      path: join(scratch.dir, file),
      pollInterval: '2ms',
      heartbeatInterval: '50ms',
      sessionTimeout: '1s',
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
    cleanup: scratch.remove,
  });
});
