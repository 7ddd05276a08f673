import { randomBytes } from 'node:crypto';
import { SILENT_LOGGER } from '../core/logger.js';
import { unreachableLedger } from '../ledger/ledger-errors.js';
import { TieredLedger } from '../ledger/tiered/tiered-ledger.js';
import { resolveServiceUrl } from './connection.js';
import { openSqliteDemoStore, type DemoStore, type DemoStoreOptions } from './demo-store.js';
import { loadDriver } from './stores.js';

/** How long the demo waits for Redis before it says it cannot reach it. */
const CONNECT_TIMEOUT_MS = 5000;

/**
 * The SQLite demo store with Redis in front of its ledger (`--store tiered`): copies of finished
 * events are answered from Redis, claims and the points go to SQLite in one transaction, and Redis
 * is written only after the commit. The run's keys live under a prefix of their own, deleted after it.
 */
export async function openTieredDemoStore(options: DemoStoreOptions): Promise<DemoStore> {
  const { url } = resolveServiceUrl('redis', options.url);
  const { createClient } = await loadDriver(() => import('redis'), 'redis');
  const client = createClient({
    url,
    socket: { reconnectStrategy: (retries: number) => Math.min(50 * (retries + 1), 500) },
  });
  // The client reconnects until the wait below gives up; its last error says why it could not connect.
  let lastError: unknown;
  client.on('error', (error: unknown) => (lastError = error));
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => {
          reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS}ms`));
        }, CONNECT_TIMEOUT_MS);
      }),
    ]);
  } catch (error) {
    client.destroy();
    throw unreachableLedger('Redis', url, lastError ?? error, true) ?? error;
  } finally {
    clearTimeout(timer);
  }
  const sqlite = await openSqliteDemoStore(options);
  const prefix = `oncemq-demo-${randomBytes(4).toString('hex')}`;
  const ledger = new TieredLedger({ ledger: sqlite.ledger, redis: client, prefix, logger: SILENT_LOGGER });
  await ledger.init();
  return {
    ...sqlite,
    name: 'tiered',
    ledger,
    cacheMetrics: () => ledger.cacheMetrics(),
    async close() {
      try {
        for await (const keys of client.scanIterator({ MATCH: `${prefix}:*`, COUNT: 500 })) {
          if (keys.length > 0) await client.del(keys);
        }
      } finally {
        client.destroy();
        await sqlite.close();
      }
    },
  };
}
