import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { findPostgres } from '../support/postgres.js';
import { findRunBroker } from '../support/run-services.js';

beforeAll(buildCli);
afterAll(removeCli);

interface OrdersJson {
  scenario: string;
  events: number;
  orders: number;
  poison: number;
  effects: number;
  duplicates: { redelivery: number; republish: number; concurrent: number };
  deadLetterMessages: Record<string, number>;
  doubleEffects: number;
  lostEffects: number;
  outOfOrder: number;
  ordersNotShipped: number;
  outboxPublished: number;
  relayDuplicates: number;
  relayCrashes: number;
  ledgerRows: number;
  faults: Record<string, number>;
  ok: boolean;
  store: string;
}

const postgres = await findPostgres();
const rabbit = await findRunBroker('rabbitmq');
const redis = await findRunBroker('redis-streams');
const nats = await findRunBroker('nats');
const rocketmq = await findRunBroker('rocketmq');

/** Runs the orders scenario with `--json` and reads its summary. */
async function orders(
  args: readonly string[],
): Promise<{ code: number; result: OrdersJson; stderr: string }> {
  const run = await oncemq(['demo', '--scenario', 'orders', '--json', ...args]);
  return { code: run.code, result: JSON.parse(run.stdout) as OrdersJson, stderr: run.stderr };
}

/** Every event applied once and in order under all faults, a relay crash among them, absorbed. */
function expectOrdersExactlyOnce(result: OrdersJson): void {
  expect(result).toMatchObject({
    scenario: 'orders',
    events: 300,
    orders: 100,
    effects: 300,
    outOfOrder: 0,
    doubleEffects: 0,
    lostEffects: 0,
    ordersNotShipped: 0,
    ledgerRows: 300,
    ok: true,
  });
  expect(result.faults['relay-crash']).toBeGreaterThan(0);
  expect(result.relayCrashes).toBe(result.faults['relay-crash']);
  expect(result.relayDuplicates).toBeGreaterThan(0);
  // Every row marked sent once; the relays' copies came back as duplicates the ledger absorbed.
  expect(result.outboxPublished).toBe(result.events + result.poison);
  expect(result.duplicates.republish).toBeGreaterThan(0);
}

describe('oncemq demo --scenario orders', () => {
  it('applies create → pay → ship once and in order per order on SQLite, through a relay crash (exit 0)', async () => {
    const { code, result } = await orders(['--events', '300', '--seed', '1']);
    expectOrdersExactlyOnce(result);
    expect(result.store).toBe('sqlite');
    expect(code).toBe(0);
  });

  it.skipIf(!postgres.available)('does the same on PostgreSQL (exit 0)', async () => {
    const { code, result } = await orders([
      '--events',
      '300',
      '--seed',
      '1',
      '--store',
      'postgres',
      '--url',
      postgres.url,
    ]);
    expectOrdersExactlyOnce(result);
    expect(result.store).toBe('postgres');
    expect(code).toBe(0);
  });

  it('dead-letters the poison messages written through the outbox, and still exits 0', async () => {
    const faults = 'poison=0.2,handler-crash,relay-crash';
    const { code, result } = await orders(['--events', '150', '--seed', '2', '--faults', faults]);
    expect(result.poison).toBeGreaterThan(0);
    expect(result.deadLetterMessages).toEqual({ malformed: result.poison });
    expect(result).toMatchObject({ outOfOrder: 0, doubleEffects: 0, lostEffects: 0, ok: true });
    expect(code).toBe(0);
  });

  it('prints the summary table with the orders lines', async () => {
    const run = await oncemq(['demo', '--scenario', 'orders', '--events', '60', '--faults', 'none']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/out of order\s+0\n/);
    expect(run.stdout).toMatch(/outbox rows published\s+60\n/);
    expect(run.stdout).toMatch(/OK: every event took effect exactly once and in order/);
  });

  const brokers = [
    { transport: 'rocketmq', broker: rocketmq, how: 'FIFO topics and an orderly group' },
    { transport: 'redis-streams', broker: redis, how: 'its shard streams and partition leases' },
    { transport: 'rabbitmq', broker: rabbit, how: 'its partition queues' },
    { transport: 'nats', broker: nats, how: 'its slot subjects and leased partition consumers' },
  ];
  for (const { transport, broker, how } of brokers) {
    it.skipIf(!broker.available)(
      `runs on ${transport}, with ${how}, relay crashes and dropped connections: nothing out of order, doubled or lost`,
      async () => {
        const run = await oncemq([
          ...['demo', '--scenario', 'orders', '--transport', transport, '--broker-url', broker.url],
          ...['--events', '300', '--seed', '1', '--json'],
        ]);
        expect(run.stderr).not.toMatch(/Error/);
        expect(run.code).toBe(0);
        const summary = JSON.parse(run.stdout) as OrdersJson;
        expect(summary).toMatchObject({
          scenario: 'orders',
          outOfOrder: 0,
          doubleEffects: 0,
          lostEffects: 0,
        });
        expect(summary.outboxPublished).toBeGreaterThanOrEqual(300);
      },
      180_000,
    );
  }

  it('refuses an unknown scenario and --naive with orders (exit 2)', async () => {
    const unknown = await oncemq(['demo', '--scenario', 'refunds']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(
      /--scenario 'refunds' is not a scenario; use payments, orders or webhooks/,
    );
    const naive = await oncemq(['demo', '--scenario', 'orders', '--naive']);
    expect(naive.code).toBe(2);
    expect(naive.stderr).toMatch(/--naive is for --scenario payments/);
  });
});
