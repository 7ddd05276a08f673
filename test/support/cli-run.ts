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

/** Runs `oncemq ARGS` from the built package to its end; never rejects on a non-zero exit. */
export async function oncemq(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  if (built === undefined) throw new Error('call buildCli() first');
  try {
    const { stdout, stderr } = await run(process.execPath, [join(built.dir, 'cli', 'oncemq.js'), ...args], {
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}
