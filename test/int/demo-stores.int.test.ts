import { describe, expect, it } from 'vitest';
import { runDemo } from '../support/internal.js';
import { parseFaults } from 'oncemq/testing';
import { mysqlService } from '../support/mysql.js';
import { findPostgres } from '../support/postgres.js';
import { REDIS_SERVICE } from '../support/redis.js';
import { findService } from '../support/services.js';

const stores = {
  postgres: await findPostgres(),
  mysql: await mysqlService(),
  tiered: await findService(REDIS_SERVICE),
};

const EVENTS = 400;

describe('oncemq demo on the server stores, under every fault', () => {
  for (const [store, service] of Object.entries(stores)) {
    it.skipIf(!service.available)(`--store ${store} applies every event once`, async () => {
      const { faults, rates } = parseFaults('all');
      const result = await runDemo({
        events: EVENTS,
        users: 40,
        consumers: 3,
        faults,
        rates,
        seed: '5',
        store,
        url: service.url,
        transport: 'local',
        naive: false,
      });
      expect(result).toMatchObject({
        store,
        effects: EVENTS,
        doubleEffects: 0,
        lostEffects: 0,
        usersWithWrongPoints: 0,
        ledgerRows: EVENTS,
        ok: true,
      });
      expect(result.deliveries).toBeGreaterThan(EVENTS);
      expect(result.duplicates.redelivery + result.duplicates.republish).toBeGreaterThan(0);
      if (store === 'tiered') {
        // Every committed event was written to Redis; copies of finished events were answered there.
        expect(result.cache?.writes).toBeGreaterThanOrEqual(EVENTS);
        expect(result.cache?.hits).toBeGreaterThan(0);
      } else {
        expect(result.cache).toBeNull();
      }
    });
  }
});
