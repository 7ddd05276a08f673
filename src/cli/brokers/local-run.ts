import type { RunTransport } from '../run-transports.js';
import { LocalBroker } from '../../transport/local/local-transport.js';
import { SILENT_LOGGER } from '../../core/logger.js';

/**
 * The local broker for `oncemq chaos`: every process opens the same SQLite file, so a killed
 * member's queues go to the others once its session times out (2 s). Nothing to clean up: the file
 * lives in the run's scratch directory.
 */
export const LOCAL_RUN_TRANSPORT = Object.freeze<RunTransport>({
  open: async ({ url }) => {
    const broker = new LocalBroker({
      path: url,
      commitInterval: '200ms',
      heartbeatInterval: '200ms',
      sessionTimeout: '2s',
      pollInterval: '5ms',
      logger: SILENT_LOGGER,
    });
    await broker.init();
    return broker;
  },
  cleanup: () => Promise.resolve(),
});
