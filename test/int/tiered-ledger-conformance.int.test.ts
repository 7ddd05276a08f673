import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createClient } from 'redis';
import { describe } from 'vitest';
import { fromNodeRedis } from 'oncemq/redis';
import { SqliteLedger } from 'oncemq/sqlite';
import { describeLedgerConformance } from 'oncemq/conformance';
import { TieredLedger } from 'oncemq/tiered';
import { scratchDir } from '../support/points.js';
import { connectRedis, REDIS_CLIENT_KINDS, REDIS_SERVICE, type TestRedis } from '../support/redis.js';
import { findService } from '../support/services.js';

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
        const scratch = scratchDir();
        const path = join(scratch.dir, 'ledger.db');
        const app = new Database(path);
        app.exec('CREATE TABLE effects (key TEXT NOT NULL)');
        const prefix = `oncemq-test-${randomUUID().slice(0, 8)}`;
        const connections: TestRedis[] = [];
        const ledgers: TieredLedger<Database.Database>[] = [];
        return Promise.resolve({
          async open(options = {}) {
            const redis = await connectRedis(kind, service.url, prefix);
            connections.push(redis);
            const ledger = new TieredLedger<Database.Database>({
              ledger: new SqliteLedger<Database.Database>({ database: path, ...options }),
              redis: redis.client,
              prefix,
            });
            ledgers.push(ledger);
            await ledger.init();
            return ledger;
          },
          effect: {
            apply: (tx, key) => void tx.prepare('INSERT INTO effects (key) VALUES (?)').run(key),
            count: (key) =>
              Promise.resolve(
                (app.prepare('SELECT COUNT(*) AS n FROM effects WHERE key = ?').get(key) as { n: number }).n,
              ),
          },
          async teardown() {
            await Promise.all(ledgers.map((ledger) => ledger.close()));
            for (const connection of connections) await connection.close();
            app.close();
            scratch.remove();
          },
        });
      },
    });
  }
});
