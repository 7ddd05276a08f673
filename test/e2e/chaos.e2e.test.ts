import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { mysqlService } from '../support/mysql.js';
import { findPostgres } from '../support/postgres.js';
import { findRunBroker } from '../support/run-services.js';
import type { Service } from '../support/services.js';

beforeAll(() => {
  buildCli();
}, 180_000);

afterAll(() => {
  removeCli();
});

interface ChaosJson {
  transport: string;
  store: string;
  events: number;
  producerResends: number;
  kills: number;
  connectionDrops: number;
  poolRestarts: number;
  effects: number;
  doubleEffects: number;
  lostEffects: number;
  deadLettered: number;
  ledgerRows: number;
  usersWithWrongPoints: number;
  settled: boolean;
  durationMs: number;
  ok: boolean;
}

const SQLITE: Service = { url: '', available: true, reason: '' };

/** Each transport once, on a store the processes can share; the server stores get their connections killed. */
const RUNS = [
  { transport: 'local', store: 'sqlite', database: SQLITE },
  { transport: 'rabbitmq', store: 'postgres', database: await findPostgres() },
  { transport: 'nats', store: 'mysql', database: await mysqlService() },
  { transport: 'redis-streams', store: 'postgres', database: await findPostgres() },
  { transport: 'kafka', store: 'postgres', database: await findPostgres() },
  { transport: 'rocketmq', store: 'mysql', database: await mysqlService() },
  { transport: 'sqs', store: 'postgres', database: await findPostgres() },
] as const;

for (const { transport, store, database } of RUNS) {
  const broker = await findRunBroker(transport);
  describe.skipIf(!broker.available || !database.available)(`oncemq chaos --transport ${transport}`, () => {
    it(`applies 300 events once over ${transport} on ${store} while consumer processes are killed, connections cut and pools restarted`, async () => {
      const run = await oncemq([
        ...['chaos', '--transport', transport, '--store', store, '--events', '300', '--consumers', '3'],
        ...['--seed', '1', '--timeout', '150000', '--json'],
      ]);
      expect(run.code, run.stderr.slice(-2000)).toBe(0);
      const result = JSON.parse(run.stdout) as ChaosJson;
      expect(result).toMatchObject({ transport, store, events: 300, ok: true, settled: true });
      expect(result.kills).toBeGreaterThanOrEqual(2);
      if (transport === 'local')
        expect(result.connectionDrops).toBe(0); // one SQLite file, no connection
      else expect(result.connectionDrops).toBeGreaterThan(0);
      if (store === 'sqlite') expect(result.poolRestarts).toBe(0);
      else expect(result.poolRestarts).toBeGreaterThan(0);
      expect(result.producerResends).toBeGreaterThan(0);
      expect(result.doubleEffects).toBe(0);
      expect(result.lostEffects).toBe(0);
      expect(result.effects).toBe(300);
      expect(result.ledgerRows).toBe(300);
      expect(result.usersWithWrongPoints).toBe(0);
      expect(result.deadLettered).toBeGreaterThan(0);
    }, 240_000);
  });
}

describe('oncemq chaos options', () => {
  it('refuses a missing transport and a store processes cannot share (exit 2)', async () => {
    const noTransport = await oncemq(['chaos', '--store', 'sqlite']);
    expect(noTransport.code).toBe(2);
    expect(noTransport.stderr).toContain(
      '--transport must be one of local, rabbitmq, nats, redis-streams, kafka, rocketmq, sqs',
    );
    const tiered = await oncemq(['chaos', '--transport', 'local', '--store', 'tiered']);
    expect(tiered.code).toBe(2);
    expect(tiered.stderr).toContain('--store must be one of sqlite, postgres, mysql');
  });

  it('lists chaos in the help, not the member process it starts', async () => {
    const help = await oncemq(['--help']);
    expect(help.stdout).toMatch(/^ {2}chaos /m);
    expect(help.stdout).not.toContain('chaos-member');
  });
});
