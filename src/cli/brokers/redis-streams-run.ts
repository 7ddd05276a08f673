import type { RunTransport } from '../run-transports.js';
import { RedisStreamsTransport } from '../../transport/redis-streams/redis-streams-transport.js';
import { openStreamConnection } from '../../transport/redis-streams/redis-streams-driver.js';
import { replyText } from '../../transport/redis-streams/redis-streams-replies.js';
import { SILENT_LOGGER } from '../../core/logger.js';

/**
 * Redis Streams for `oncemq demo` and `oncemq chaos`: every key under the run's namespace, a short
 * failure backoff so a dropped connection costs little.
 */
export const REDIS_STREAMS_RUN_TRANSPORT = Object.freeze<RunTransport>({
  service: 'redis',
  open: ({ url, namespace }) =>
    // A run cuts connections on purpose: their lines would drown its summary.
    RedisStreamsTransport.connect(url, { prefix: namespace, failureBackoff: '200ms', logger: SILENT_LOGGER }),
  cleanup: async ({ url, namespace }) => {
    const connection = await openStreamConnection(url);
    try {
      let cursor = '0';
      do {
        const reply = (await connection.send([
          'SCAN',
          cursor,
          'MATCH',
          `${namespace}:*`,
          'COUNT',
          '500',
        ])) as [unknown, unknown[]];
        cursor = replyText(reply[0]) ?? '0';
        const keys = reply[1].map((key) => replyText(key) ?? '').filter((key) => key !== '');
        if (keys.length > 0) await connection.send(['DEL', ...keys]);
      } while (cursor !== '0');
    } finally {
      await connection.close();
    }
  },
});
