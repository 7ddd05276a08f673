import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { findPostgres } from '../support/postgres.js';

beforeAll(buildCli);
afterAll(removeCli);

interface WebhooksJson {
  scenario: string;
  events: number;
  receivers: number;
  deliveries: number;
  effects: number;
  duplicates: { redelivery: number; republish: number; concurrent: number };
  doubleEffects: number;
  lostEffects: number;
  usersWithWrongPoints: number;
  ledgerRows: number | null;
  faults: Record<string, number>;
  sender: {
    requests: number;
    timeouts: number;
    serverErrors: number;
    inFlight: number;
    connectionErrors: number;
    resent: number;
    gaveUp: number;
  };
  receiverRestarts: number;
  naive: boolean;
  ok: boolean;
  store: string;
  doubleKeys: string[];
}

const postgres = await findPostgres();

/** A run still going after this is killed and fails with its output (a run takes a few seconds). */
const RUN_KILL_MS = 60_000;
/** The test's own limit: past the kill, so that a hung run fails with what it printed. */
const TEST_MS = 90_000;

/** Every fault of the scenario at a rate that a run of 300 deliveries hits several times (dropped answers more often: a kill of the same receiver can turn one into a reset rather than a timeout). */
const FAULTS = [
  'producer-ack-loss=0.03',
  'consumer-ack-loss=0.06',
  'crash-after-commit=0.02',
  'handler-crash=0.03',
  'commit-failure=0.03',
].join(',');

/** Runs the webhooks scenario with `--json` on 300 deliveries and reads its summary. */
async function webhooks(args: readonly string[]): Promise<{ code: number; result: WebhooksJson }> {
  const run = await oncemq(
    ['demo', '--scenario', 'webhooks', '--events', '300', '--faults', FAULTS, '--json', ...args],
    {},
    RUN_KILL_MS,
  );
  expect(run.stderr).not.toMatch(/Error/);
  return { code: run.code, result: JSON.parse(run.stdout) as WebhooksJson };
}

/** Every fault injected, every delivery applied once: nothing doubled, nothing lost. */
function expectExactlyOnce(result: WebhooksJson): void {
  expect(result).toMatchObject({
    scenario: 'webhooks',
    events: 300,
    effects: 300,
    doubleEffects: 0,
    lostEffects: 0,
    usersWithWrongPoints: 0,
    ledgerRows: 300,
    naive: false,
    ok: true,
  });
  for (const fault of [
    'producer-ack-loss',
    'consumer-ack-loss',
    'crash-after-commit',
    'handler-crash',
    'commit-failure',
  ]) {
    expect(result.faults[fault], fault).toBeGreaterThan(0);
  }
  // What the faults did to the sender: retries of each kind, resends, and receivers killed.
  expect(result.sender.timeouts).toBeGreaterThan(0);
  expect(result.sender.serverErrors).toBeGreaterThan(0);
  expect(result.sender.connectionErrors).toBeGreaterThan(0);
  expect(result.sender.resent).toBe(result.faults['producer-ack-loss']);
  expect(result.sender.gaveUp).toBe(0);
  expect(result.receiverRestarts).toBeGreaterThan(0);
  expect(result.receiverRestarts).toBeLessThanOrEqual(result.faults['crash-after-commit'] ?? 0);
  // The copies came back and were answered from the stored response, without running the handler.
  const replays = result.duplicates.redelivery + result.duplicates.republish + result.duplicates.concurrent;
  expect(replays).toBeGreaterThan(0);
  expect(result.deliveries).toBeGreaterThan(300);
}

describe('oncemq demo --scenario webhooks', () => {
  it(
    'applies every signed delivery once on SQLite through receiver kills, dropped answers, failed handlers and commits, and resends (exit 0)',
    async () => {
      const { code, result } = await webhooks(['--seed', '2']);
      expectExactlyOnce(result);
      expect(result.store).toBe('sqlite');
      expect(code).toBe(0);
    },
    TEST_MS,
  );

  it.skipIf(!postgres.available)(
    'does the same on PostgreSQL (exit 0)',
    async () => {
      const { code, result } = await webhooks(['--seed', '2', '--store', 'postgres', '--url', postgres.url]);
      expectExactlyOnce(result);
      expect(result.store).toBe('postgres');
      expect(code).toBe(0);
    },
    TEST_MS,
  );

  it(
    'shows double effects for naive receivers under the same faults (exit 1)',
    async () => {
      const { code, result } = await webhooks(['--seed', '2', '--naive']);
      expect(result.doubleEffects).toBeGreaterThan(0);
      expect(result.doubleKeys.length).toBeGreaterThan(0);
      expect(result).toMatchObject({ naive: true, ok: false, ledgerRows: null });
      expect(code).toBe(1);
    },
    TEST_MS,
  );

  it('prints the summary table, with progress lines on stderr', async () => {
    const run = await oncemq(['demo', '--scenario', 'webhooks', '--events', '60', '--faults', 'none']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/effects applied\s+60\n/);
    expect(run.stdout).toMatch(/double effects\s+0\n/);
    expect(run.stdout).toMatch(/OK: every webhook event took effect exactly once/);
    expect(run.stderr.trim().split('\n').at(-1)).toBe('delivered 60/60 (100%)');
  });

  it('refuses a broker for the webhooks scenario in one line (exit 2)', async () => {
    const run = await oncemq(['demo', '--scenario', 'webhooks', '--transport', 'rabbitmq']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^oncemq demo: --transport is not for --scenario webhooks/);
  });
});
