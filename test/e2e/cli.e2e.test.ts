import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const cli = fileURLToPath(new URL('../../dist/esm/cli/oncemq.js', import.meta.url));

async function oncemq(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [cli, ...args]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('the oncemq command', () => {
  it('runs the example and proves every event applied once', async () => {
    const { code, stdout } = await oncemq('example', '--events', '300', '--copies', '4', '--json');
    expect(code).toBe(0);
    const result = JSON.parse(stdout) as Record<string, unknown>;
    expect(result).toMatchObject({
      events: 300,
      deliveries: 1200,
      effects: 300,
      usersWithWrongBalance: 0,
      ok: true,
    });
    expect(result.duplicates).toEqual({ redelivery: 300, republish: 600, concurrent: 0 });
  });

  it('answers a bad flag with one line naming it and a pointer to --help, exit code 2', async () => {
    const cases: [string[], string][] = [
      [['demo', '--events', '-5'], "oncemq demo: --events must be a positive whole number, got '-5'"],
      [['demo', '--evnts', '5'], "oncemq demo: unknown option '--evnts'"],
      [['demo', 'extra'], "oncemq demo: unexpected argument 'extra'"],
      [['demo', '--json=yes'], 'oncemq demo: --json takes no value'],
      [['demo', '--seed'], 'oncemq demo: --seed needs a value'],
      [
        ['example', '--events', 'many'],
        "oncemq example: --events must be a positive whole number, got 'many'",
      ],
    ];
    for (const [args, message] of cases) {
      const { code, stdout, stderr } = await oncemq(...args);
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr).toBe(`${message}\nRun 'oncemq ${args[0] ?? ''} --help' for its options.\n`);
    }
  });

  it('lists its commands and refuses an unknown one with one line and a pointer to --help', async () => {
    expect((await oncemq('--help')).stdout).toMatch(/example/);
    const unknown = await oncemq('nope');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe("oncemq: unknown command 'nope'\nRun 'oncemq --help' for the commands.\n");
  });

  it('says in the demo help what the seed repeats and what varies with timing', async () => {
    const { code, stdout } = await oncemq('demo', '--help');
    expect(code).toBe(0);
    expect(stdout).toMatch(/commit-failure/);
    expect(stdout).toMatch(/Same seed, same faults/);
    expect(stdout).toMatch(/What varies with timing: rebalance/);
  });
});
