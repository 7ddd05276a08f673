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
  deadLetterMessages: Record<string, number>;
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
    expect(result.faults['commit-failure']).toBeGreaterThan(0);
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

  it('injects the same faults for the same seed: every count but rebalance repeats, whatever the timing', async () => {
    const args = ['demo', '--events', '2000', '--json', '--seed', '9', '--consumers', '4'];
    // Run side by side, so the two runs interleave differently.
    const runs = await Promise.all([runNode(cli(), args), runNode(cli(), args)]);
    const [a, b] = runs.map((run) =>
      Object.fromEntries(
        Object.entries((JSON.parse(run.stdout) as DemoJson).faults).filter(([name]) => name !== 'rebalance'),
      ),
    );
    expect(a).toEqual(b);
    expect(Object.keys(a ?? {})).toEqual([
      'producer-ack-loss',
      'consumer-ack-loss',
      'crash-after-commit',
      'handler-crash',
      'commit-failure',
      'poison',
    ]);
    for (const count of Object.values(a ?? {})) expect(count).toBeGreaterThan(0);
  });

  it('keeps every effect when commits fail after the handler: nothing is acked before its commit', async () => {
    const args = ['demo', '--events', '400', '--json', '--faults', 'commit-failure=0.2'];
    const run = await runNode(cli(), args);
    const result = JSON.parse(run.stdout) as DemoJson;
    expect(result.faults['commit-failure']).toBeGreaterThan(40);
    expect(result).toMatchObject({
      effects: 400,
      lostEffects: 0,
      doubleEffects: 0,
      ledgerRows: 400,
      ok: true,
    });
    expect(run.code).toBe(0);
  });

  it('explains every dead letter by reason, and the messages behind them, in the table and the JSON', async () => {
    const args = ['--events', '300', '--seed', '4', '--consumers', '1'];
    const faults = ['--faults', 'poison=0.05,producer-ack-loss=0.5'];
    const [table, json] = await Promise.all([
      runNode(cli(), ['demo', ...args, ...faults]),
      runNode(cli(), ['demo', ...args, ...faults, '--json']),
    ]);
    const result = JSON.parse(json.stdout) as DemoJson;
    const letters = Object.values(result.deadLetterReasons).reduce((sum, n) => sum + n, 0);
    expect(letters).toBe(result.deadLettered);
    expect(result.deadLetterMessages).toEqual({ malformed: result.poison });
    expect(result.deadLettered).toBeGreaterThan(result.poison); // resent copies are dead-lettered too
    const extra = result.deadLettered - result.poison;
    expect(table.stdout).toMatch(new RegExp(`dead-lettered\\s+${result.deadLettered}\n`));
    expect(table.stdout).toMatch(
      new RegExp(
        `\\n    malformed\\s+${result.deadLettered} = ${result.poison} messages whose body cannot be decoded \\(the poison messages\\) \\+ ${extra} more cop(y|ies) of them, resent or replayed\n`,
      ),
    );
  });

  it('writes progress lines, not a bar, to stderr without a terminal; stdout stays one JSON object', async () => {
    const run = await runNode(cli(), ['demo', '--events', '300', '--faults', 'none', '--json']);
    expect(run.code).toBe(0);
    expect(run.stdout.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ events: 300, ok: true });
    expect(run.stderr).not.toContain('\r');
    const lines = run.stderr.trim().split('\n');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatch(/^consumed \d+\/300 \(\d+%\)$/);
    expect(lines.at(-1)).toBe('consumed 300/300 (100%)');
  });

  it('prints a summary table and refuses an unknown store or fault', async () => {
    const table = await runNode(cli(), ['demo', '--events', '50', '--faults', 'none']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/double effects\s+0/);
    expect(table.stdout).toMatch(/OK: every event took effect exactly once/);
    expect((await runNode(cli(), ['demo', '--store', 'oracle'])).code).toBe(2);
    const fault = await runNode(cli(), ['demo', '--faults', 'gremlins']);
    expect(fault.code).toBe(2);
    expect(fault.stderr).toMatch(/^oncemq demo: --faults: unknown fault 'gremlins'/);
  });
});
