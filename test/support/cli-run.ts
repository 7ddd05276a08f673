import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildPackage } from './built-package.js';

const run = promisify(execFile);

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

let built: ReturnType<typeof buildPackage> | undefined;

/**
 * Compiles the package into a scratch folder of this test file's own (files running side by side
 * never share a half-written build); call it from a beforeAll with a long timeout, and
 * {@link removeCli} from an afterAll.
 */
export function buildCli(): void {
  built = buildPackage();
}

export function removeCli(): void {
  built?.remove();
  built = undefined;
}

/**
 * Runs `oncemq ARGS` from the built package to its end; never rejects on a non-zero exit. With
 * `killAfterMs`, a run still going then is killed (code -1) and its output so far is answered, with
 * a last line saying so: a hung run fails with what it printed instead of at the test's timeout.
 */
export async function oncemq(
  args: readonly string[],
  env: Record<string, string> = {},
  killAfterMs?: number,
): Promise<CliResult> {
  if (built === undefined) throw new Error('call buildCli() first');
  try {
    const { stdout, stderr } = await run(process.execPath, [join(built.dir, 'cli', 'oncemq.js'), ...args], {
      env: { ...process.env, ...env },
      ...(killAfterMs === undefined ? {} : { timeout: killAfterMs, killSignal: 'SIGKILL' as const }),
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number | null; killed?: boolean; stdout: string; stderr: string };
    if (failed.killed === true)
      return {
        code: -1,
        stdout: failed.stdout,
        stderr: `${failed.stderr}\n[killed after ${killAfterMs} ms]`,
      };
    return { code: failed.code ?? -1, stdout: failed.stdout, stderr: failed.stderr };
  }
}
