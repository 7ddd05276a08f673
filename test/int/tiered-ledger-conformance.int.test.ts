import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { createClient } from 'redis';
import { describe } from 'vitest';
import { fromNodeRedis } from 'oncemq/redis';
import { SqliteLedger } from 'oncemq/sqlite';
import { describeLedgerConformance } from 'oncemq/conformance';
import { TieredLedger } from 'oncemq/tiered';
import { connectRedis, REDIS_CLIENT_KINDS, REDIS_SERVICE, type TestRedis } from '../support/redis.js';
import { findService } from '../support/services.js';
import { sqliteNamespace } from '../support/sqlite.js';

const service = await findService(REDIS_SERVICE);
const unconnected = fromNodeRedis(createClient());

describe.skipIf(!service.available)('TieredLedger conformance over SQLite', () => {
  for (const kind of REDIS_CLIENT_KINDS) {
    describeLedgerConformance<Database.Database>(`tiered over sqlite (${kind})`, {
      capabilities: new TieredLedger({
        ledger: new SqliteLedger({ database: 'probe.db' }),
        redis: unconnected,
      }).capabilities,
      waitsForInflightTransactions: false,
      construct: (table) =>
        new TieredLedger({ ledger: new SqliteLedger({ database: ':memory:', table }), redis: unconnected }),
      create() {
        const prefix = `oncemq-test-${randomUUID().slice(0, 8)}`;
        const connections: TestRedis[] = [];
        return sqliteNamespace(
          async (path, options) => {
            const redis = await connectRedis(kind, service.url, prefix);
            connections.push(redis);
            return new TieredLedger<Database.Database>({
              ledger: new SqliteLedger<Database.Database>({ database: path, ...options }),
              redis: redis.client,
              prefix,
            });
          },
          async () => {
            for (const connection of connections) await connection.close();
          },
        );
      },
    });
  }
});
