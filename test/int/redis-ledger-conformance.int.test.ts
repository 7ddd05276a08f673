import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import { describe } from 'vitest';
import { fromNodeRedis, RedisLedger } from 'oncemq/redis';
import { describeLedgerConformance } from 'oncemq/conformance';
import { connectRedis, REDIS_CLIENT_KINDS, REDIS_SERVICE, type TestRedis } from '../support/redis.js';
import { findService } from '../support/services.js';

const service = await findService(REDIS_SERVICE);
/** Capabilities are known before any connection: a client that is never connected is enough. */
const capabilities = new RedisLedger({ client: fromNodeRedis(createClient()) }).capabilities;

describe.skipIf(!service.available)('RedisLedger conformance', () => {
  for (const kind of REDIS_CLIENT_KINDS) {
    describeLedgerConformance<never>(`redis (${kind})`, {
      capabilities,
      raceConnections: 4,
      create() {
        const prefix = `oncemq-test-${randomUUID().slice(0, 8)}`;
        const connections: TestRedis[] = [];
        return Promise.resolve({
          async open(options = {}) {
            const redis = await connectRedis(kind, service.url, prefix);
            connections.push(redis);
            const ledger = new RedisLedger({ client: redis.client, prefix, ...options });
            await ledger.init();
            return ledger;
          },
          async teardown() {
            for (const connection of connections) await connection.close();
          },
        });
      },
    });
  }
});
