import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Compiles the package into a scratch folder under node_modules/.cache (so that child processes
 * resolve better-sqlite3 from the project). Run once per test run by `build-setup.ts`.
 */
export function compilePackage(): { dir: string; remove: () => void } {
  const cache = join(root, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'oncemq-build-'));
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(
    process.execPath,
    [tsc, '-p', 'tsconfig.build.json', '--outDir', dir, '--declaration', 'false', '--sourceMap', 'false'],
    { cwd: root, stdio: 'inherit' },
  );
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The package compiled for this test run, for tests that run the CLI or separate processes. The run's
 * global setup compiled it and removes it at the end: `remove` here does nothing.
 */
export function buildPackage(): { dir: string; remove: () => void } {
  return { dir: inject('builtPackageDir'), remove: () => undefined };
}

export interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `node file args` to its end. */
export function runNode(file: string, args: readonly string[], cwd = root): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}
