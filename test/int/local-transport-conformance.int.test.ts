import { join } from 'node:path';
import { LocalBroker } from 'oncemq/local';
import { describeTransportConformance } from 'oncemq/conformance';
import { scratchDir } from '../support/points.js';

describeTransportConformance('local', () => {
  const scratch = scratchDir();
  const transport = new LocalBroker({
    path: join(scratch.dir, 'broker.db'),
    pollInterval: '2ms',
    heartbeatInterval: '50ms',
    sessionTimeout: '1s',
  });
  return Promise.resolve({ transport, cleanup: scratch.remove });
});
