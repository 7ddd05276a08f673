import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const cli = fileURLToPath(new URL('../../dist/cli/oncemq.js', import.meta.url));

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

  it('answers a wrong flag with its usage and exit code 2', async () => {
    const { code, stderr } = await oncemq('example', '--events', 'many');
    expect(code).toBe(2);
    expect(stderr).toMatch(/--events must be a positive whole number/);
  });

  it('lists its commands and refuses an unknown one', async () => {
    expect((await oncemq('--help')).stdout).toMatch(/example/);
    const unknown = await oncemq('nope');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command 'nope'/);
  });
});
