import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { findPostgres } from '../support/postgres.js';
import { findRunBroker } from '../support/run-services.js';

/** Why this machine cannot make test hosts (network namespaces), or undefined when it can. */
function hostsUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'network namespaces need Linux';
  if (process.getuid?.() !== 0) return 'making network namespaces needs root';
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'pipe' });
    return undefined;
  } catch {
    return '`ip netns` (iproute2) is not available';
  }
}

/** The test hosts' network namespaces there are now. */
function namespaces(): string[] {
  return (
    execFileSync('ip', ['netns', 'list'])
      .toString()
      .match(/omq-\S+/g) ?? []
  );
}

const postgres = await findPostgres();
const broker = await findRunBroker('nats');
const skipped =
  hostsUnavailable() ??
  (postgres.available ? undefined : postgres.reason) ??
  (broker.available ? undefined : broker.reason);

describe.skipIf(skipped !== undefined)(
  `oncemq chaos --hosts: consumers on hosts cut off the network${skipped === undefined ? '' : ` (skipped: ${skipped})`}`,
  () => {
    beforeAll(() => {
      buildCli();
    }, 180_000);

    afterAll(() => {
      removeCli();
    });

    it('applies 1500 events once while a host is cut off for longer than the ack wait, its deliveries taken over by the other host', async () => {
      const before = namespaces();
      const run = await oncemq([
        ...['chaos', '--transport', 'nats', '--store', 'postgres', '--events', '1500', '--consumers', '2'],
        // the first cut 2 to 6 s in, while events flow, for more than the run's 5 s ack wait
        ...['--hosts', '2', '--cut-every', '4000', '--cut-for', '10000', '--rounds', '0'],
        // the cuts alone: no member killed, no connection reset, no pool restarted, no publish resent
        ...['--kill-every', '0', '--drop-every', '0', '--pool-every', '0', '--resend-rate', '0'],
        ...['--seed', '1'],
        ...['--timeout', '150000', '--json'],
      ]);
      expect(run.code, run.stderr.slice(-2000)).toBe(0);
      const result = JSON.parse(run.stdout) as Record<string, unknown> & { hostCuts: number };
      expect(result).toMatchObject({ hosts: 2, doubleEffects: 0, lostEffects: 0, ok: true });
      expect({ effects: result.effects, ledgerRows: result.ledgerRows }).toEqual({
        effects: 1500,
        ledgerRows: 1500,
      });
      expect(result.hostCuts).toBeGreaterThanOrEqual(1);
      // the run's hosts are gone again (other runs' may come and go meanwhile)
      expect(namespaces().filter((name) => !before.includes(name))).toEqual([]);
    }, 240_000);

    it('in leased mode completes each of 800 events once, by the owner of its last claim, while a host is cut off past the lease', async () => {
      const before = namespaces();
      const run = await oncemq([
        ...['chaos', '--transport', 'nats', '--store', 'postgres', '--events', '800', '--consumers', '2'],
        // a 3 s lease: a cut of 10 s outlives it and the 5 s ack wait: the other host takes over what the cut one held
        ...['--mode', 'leased', '--lease', '3000'],
        ...['--hosts', '2', '--cut-every', '4000', '--cut-for', '10000', '--rounds', '0'],
        ...['--kill-every', '0', '--drop-every', '0', '--pool-every', '0', '--resend-rate', '0'],
        ...['--seed', '1'],
        ...['--timeout', '150000', '--json'],
      ]);
      expect(run.code, run.stderr.slice(-2000)).toBe(0);
      const result = JSON.parse(run.stdout) as Record<string, unknown> & {
        hostCuts: number;
        takeovers: number;
        staleCompletesRefused: number;
        applications: number;
      };
      expect(result).toMatchObject({
        mode: 'leased',
        leaseMs: 3000,
        hosts: 2,
        lostEffects: 0,
        staleCompletesAccepted: 0,
        ledgerRows: 800,
        ok: true,
      });
      expect(result.hostCuts).toBeGreaterThanOrEqual(1);
      expect(result.applications).toBeGreaterThanOrEqual(800);
      // A refused completion is an owner whose key was claimed again after it: never more of them
      // than takeovers. How many the cut causes depends on what the cut host held at that moment
      // (none, when it caught the host between deliveries), so neither count is required.
      expect(result.staleCompletesRefused).toBeLessThanOrEqual(result.takeovers);
      expect(namespaces().filter((name) => !before.includes(name))).toEqual([]);
    }, 240_000);
  },
);
