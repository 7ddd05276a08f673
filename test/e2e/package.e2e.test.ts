import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

describe('the packed package', () => {
  let dir = '';
  beforeAll(() => {
    // Made when the tests run, not when the file is collected (`vitest list` runs no after-hooks).
    dir = mkdtempSync(join(tmpdir(), 'oncemq-pack-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('installs from its tarball and resolves its subpath exports for a consumer without vitest', async () => {
    const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], {
      cwd: root,
    });
    const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
    if (packed === undefined) throw new Error('npm pack reported nothing');
    expect(packed.files.some((file) => file.path.startsWith('src/'))).toBe(false);
    expect(packed.files.some((file) => file.path.startsWith('test/'))).toBe(false);
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
