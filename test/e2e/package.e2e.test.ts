import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

/** Scripts npm runs (or, since npm 11, warns about) when a package is installed. */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare'];

describe('the packed package', () => {
  let dir = '';
  let packed: { filename: string; files: { path: string }[] };
  beforeAll(async () => {
    // Made when the tests run, not when the file is collected (`vitest list` runs no after-hooks).
    dir = mkdtempSync(join(tmpdir(), 'oncemq-pack-'));
    // --ignore-scripts: pack the dist that `npm test` built (prepack would build it again under the tests).
    const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], {
      cwd: root,
    });
    const [first] = JSON.parse(stdout) as (typeof packed)[];
    if (first === undefined) throw new Error('npm pack reported nothing');
    packed = first;
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('installs with npm without an install-time script to run or to warn about', async () => {
    const app = join(dir, 'npm-app');
    mkdirSync(app);
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({ name: 'app', version: '1.0.0', private: true }),
    );
    const installed = await run(
      'npm',
      ['install', '--offline', '--no-audit', '--no-fund', join(dir, packed.filename)],
      { cwd: app },
    );
    expect(`${installed.stdout}${installed.stderr}`).not.toMatch(/install-scripts|prepare|npm warn/i);
    const manifest = JSON.parse(
      readFileSync(join(app, 'node_modules', 'oncemq', 'package.json'), 'utf8'),
    ) as { scripts?: Record<string, string> };
    expect(Object.keys(manifest.scripts ?? {}).filter((name) => INSTALL_SCRIPTS.includes(name))).toEqual([]);
  });

  it('installs from its tarball and resolves its subpath exports for a consumer without vitest', async () => {
    expect(packed.files.some((file) => file.path.startsWith('src/'))).toBe(false);
    expect(packed.files.some((file) => file.path.startsWith('test/'))).toBe(false);
    // The licence goes with the code; the dashboard's screenshots stay in the repository.
    expect(packed.files.map((file) => file.path)).toContain('LICENSE');
    expect(packed.files.filter((file) => /\.(png|jpe?g)$/.test(file.path))).toEqual([]);
    const installed = join(dir, 'app', 'node_modules');
    mkdirSync(join(installed, 'oncemq'), { recursive: true });
    await run('tar', [
      '-xzf',
      join(dir, packed.filename),
      '-C',
      join(installed, 'oncemq'),
      '--strip-components=1',
    ]);
    symlinkSync(join(root, 'node_modules', 'better-sqlite3'), join(installed, 'better-sqlite3'));
    writeFileSync(
      join(dir, 'app', 'main.mjs'),
      `import { createPipeline, createEnvelope } from 'oncemq';
       import { SqliteLedger } from 'oncemq/sqlite';
       import { EffectChecker, FaultInjector } from 'oncemq/testing';
       if (typeof EffectChecker !== 'function' || typeof FaultInjector !== 'function') throw new Error('oncemq/testing');
       const ledger = new SqliteLedger({ database: ':memory:' });
       const pipeline = createPipeline({ ledger, group: 'g', key: { jsonPath: 'id' }, handler: () => 'ok' });
       const envelope = createEnvelope({ brokerId: 'b', topic: 't', body: { id: 'k1' } });
       const first = await pipeline.process(envelope);
       const second = await pipeline.process(envelope);
       console.log(JSON.stringify([first.kind, second.kind, second.result]));
       await ledger.close();`,
    );
    const result = await run(process.execPath, [join(dir, 'app', 'main.mjs')]);
    expect(JSON.parse(result.stdout)).toEqual(['executed', 'duplicate', 'ok']);
    const bin = await run(process.execPath, [
      join(installed, 'oncemq', 'dist', 'cli', 'oncemq.js'),
      '--help',
    ]);
    expect(bin.stdout).toMatch(/Usage: oncemq/);
  });
});
