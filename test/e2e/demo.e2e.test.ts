import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPackage, runNode } from '../support/built-package.js';

let build: ReturnType<typeof buildPackage>;
const cli = (): string => join(build.dir, 'cli', 'oncemq.js');

beforeAll(() => {
  build = buildPackage();
});

afterAll(() => {
  build.remove();
});

interface DemoJson {
  events: number;
  deliveries: number;
  effects: number;
  duplicates: { redelivery: number; republish: number; concurrent: number };
  deadLettered: number;
  deadLetterReasons: Record<string, number>;
  doubleEffects: number;
  lostEffects: number;
  ok: boolean;
  store: string;
  transport: string;
  elapsedMs: number;
  messagesPerSecond: number;
  poison: number;
  ledgerRows: number | null;
  faults: Record<string, number>;
}

describe('oncemq demo', () => {
  it('applies every event once under all faults and prints the JSON summary (exit 0)', async () => {
    const run = await runNode(cli(), ['demo', '--events', '400', '--json', '--seed', '3']);
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as DemoJson;
    expect(result).toMatchObject({ events: 400, effects: 400, doubleEffects: 0, lostEffects: 0, ok: true });
    expect(result).toMatchObject({ store: 'sqlite', transport: 'local', ledgerRows: 400 });
    expect(result.deliveries).toBeGreaterThan(400);
    expect(result.duplicates.redelivery + result.duplicates.republish).toBeGreaterThan(0);
    expect(result.faults['producer-ack-loss']).toBeGreaterThan(0);
    expect(result.deadLettered).toBeGreaterThanOrEqual(result.poison);
    expect(result.elapsedMs).toBeGreaterThan(0);
    expect(result.messagesPerSecond).toBeGreaterThan(0);
  });

  it('shows double effects for a naive consumer under the same faults (exit 1)', async () => {
    const run = await runNode(cli(), ['demo', '--events', '400', '--json', '--seed', '3', '--naive']);
    expect(run.code).toBe(1);
    const result = JSON.parse(run.stdout) as DemoJson;
    expect(result.doubleEffects).toBeGreaterThan(0);
    expect(result.ok).toBe(false);
    expect(result.ledgerRows).toBeNull();
  });

  it('injects the same producer-side faults for the same seed', async () => {
    const args = [
      'demo',
      '--events',
      '300',
      '--json',
      '--seed',
      '9',
      '--faults',
      'producer-ack-loss,poison',
      '--consumers',
      '1',
    ];
    const [one, two] = await Promise.all([runNode(cli(), args), runNode(cli(), args)]);
    const a = JSON.parse(one.stdout) as DemoJson;
    const b = JSON.parse(two.stdout) as DemoJson;
    expect(a.faults).toEqual(b.faults);
    expect(a.faults['producer-ack-loss']).toBeGreaterThan(0);
    expect(a.deliveries).toBe(b.deliveries);
  });

  it('prints a summary table and refuses an unknown store or fault', async () => {
    const table = await runNode(cli(), ['demo', '--events', '50', '--faults', 'none']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/double effects\s+0/);
    expect(table.stdout).toMatch(/OK: every event took effect exactly once/);
    expect((await runNode(cli(), ['demo', '--store', 'oracle'])).code).toBe(2);
    expect((await runNode(cli(), ['demo', '--faults', 'gremlins'])).code).toBe(2);
  });
});
