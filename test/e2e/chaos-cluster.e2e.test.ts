import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { findPostgres } from '../support/postgres.js';

const BROKERS = fileURLToPath(new URL('../../brokers/brokers.js', import.meta.url));

/** The nats-server the cluster runs, as `npm run brokers` finds it. */
function natsServer(): string | undefined {
  const configured = process.env.ONCEMQ_NATS_SERVER;
  const candidates = [
    ...(configured === undefined || configured === '' ? [] : [configured]),
    '/usr/sbin/nats-server',
    '/usr/bin/nats-server',
    '/usr/local/bin/nats-server',
    'nats-server',
  ];
  return candidates.find((candidate) => spawnSync(candidate, ['--version']).status === 0);
}

const postgres = await findPostgres();
const skipped =
  natsServer() === undefined
    ? 'nats-server is not installed (or set ONCEMQ_NATS_SERVER to its path)'
    : postgres.available
      ? undefined
      : postgres.reason;

interface NodeFault {
  kind: 'kill' | 'pause';
  node: string;
  leader: boolean;
}

// Its own brokers directory: the cluster's files are this file's; its ports (4301-4303, 6301-6303,
// 8301-8303) are fixed, so a cluster started by hand must be stopped first.
const home = mkdtempSync(join(tmpdir(), 'oncemq-cluster-'));
const env = { ...process.env, ONCEMQ_BROKERS_DIR: home };

describe.skipIf(skipped !== undefined)(
  `oncemq chaos --cluster on a 3-node NATS cluster${skipped === undefined ? '' : ` (skipped: ${skipped})`}`,
  () => {
    beforeAll(() => {
      buildCli();
      execFileSync(process.execPath, [BROKERS, 'start', '--cluster', 'nats'], { env, stdio: 'pipe' });
    }, 180_000);

    afterAll(() => {
      execFileSync(process.execPath, [BROKERS, 'stop', '--cluster', 'nats'], { env, stdio: 'pipe' });
      rmSync(home, { recursive: true, force: true });
      removeCli();
    }, 120_000);

    it('applies 300 events once while the leader of the stream is killed with SIGKILL and started again', async () => {
      const run = await oncemq([
        ...['chaos', '--transport', 'nats', '--store', 'postgres', '--events', '300', '--consumers', '3'],
        ...['--cluster', '--cluster-file', join(home, 'run', 'cluster-nats', 'cluster.json')],
        ...['--node-every', '600000', '--node-down', '2000', '--rounds', '1', '--kill-every', '0'],
        ...['--seed', '1', '--timeout', '150000', '--json'],
      ]);
      expect(run.code, run.stderr.slice(-2000)).toBe(0);
      const result = JSON.parse(run.stdout) as {
        ok: boolean;
        effects: number;
        doubleEffects: number;
        lostEffects: number;
        ledgerRows: number;
        nodeKills: number;
        nodeFaults: NodeFault[];
      };
      // the round's node failure: the stream's leader, as JetStream named it, killed and back
      expect(result.nodeKills).toBe(1);
      expect(result.nodeFaults[0]).toMatchObject({ kind: 'kill', leader: true });
      expect(result.doubleEffects).toBe(0);
      expect(result.lostEffects).toBe(0);
      expect(result.effects).toBe(300);
      expect(result.ledgerRows).toBe(300);
      expect(result.ok).toBe(true);
    }, 240_000);
  },
);
