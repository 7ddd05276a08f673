import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brokersCommand, brokerStatus, type BrokerName } from './brokers.js';

/** Where each test run on this machine that may use the brokers leaves its pid, and the brokers to stop. */
const RUNS_DIR = join(tmpdir(), 'oncemq-test-runs');
const TO_STOP = join(RUNS_DIR, 'to-stop.json');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The pids of the other test runs still going (a run killed before its teardown is not counted). */
function otherRuns(): number[] {
  return readdirSync(RUNS_DIR)
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => pid !== process.pid && alive(pid));
}

function readToStop(): BrokerName[] {
  try {
    return JSON.parse(readFileSync(TO_STOP, 'utf8')) as BrokerName[];
  } catch {
    return [];
  }
}

/**
 * Vitest global setup: the first test file that needs Kafka or RocketMQ starts it (test/support/brokers.ts),
 * once for every file of the run; after the run, the brokers the run started are stopped and those that
 * ran before it (started by `.ci/run` or by hand) are left as they were. Runs that overlap on one machine
 * share the brokers: a run that ends while another is still going hands the brokers it started to that
 * run (`to-stop.json`), and the last run to end stops them.
 */
export default async function setup(): Promise<() => Promise<void>> {
  mkdirSync(RUNS_DIR, { recursive: true });
  const mine = join(RUNS_DIR, String(process.pid));
  writeFileSync(mine, '');
  const runningBefore = new Set((await brokerStatus()).filter((broker) => broker.running).map((b) => b.name));
  return async () => {
    rmSync(mine, { force: true });
    const running = new Set((await brokerStatus()).filter((broker) => broker.running).map((b) => b.name));
    const ours = [...running].filter((name) => !runningBefore.has(name));
    const owed = [...new Set([...readToStop(), ...ours])].filter((name) => running.has(name));
    if (otherRuns().length > 0) {
      writeFileSync(TO_STOP, JSON.stringify(owed));
      return;
    }
    rmSync(TO_STOP, { force: true });
    if (owed.length > 0) await brokersCommand(['stop', ...owed]);
  };
}
