import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = (name: string): string => join(root, 'node_modules', '.bin', name);
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  entryPoints: string[];
};
const specifiers = manifest.entryPoints.map((subpath) =>
  subpath === '.' ? manifest.name : `${manifest.name}${subpath.slice(1)}`,
);

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
      join(installed, 'oncemq', 'dist', 'esm', 'cli', 'oncemq.js'),
      '--help',
    ]);
    expect(bin.stdout).toMatch(/Usage: oncemq/);
  });

  it('passes arethetypeswrong and publint without a problem', async () => {
    const tarball = join(dir, packed.filename);
    // Every entry point resolves, with declarations of its format, under node10, node16 (from CommonJS and
    // from ES modules) and bundler; both tools exit non-zero on a problem.
    const types = await run(bin('attw'), [tarball, '--no-definitely-typed', '--no-color']);
    expect(types.stdout).toContain('No problems found');
    const lint = await run(bin('publint'), ['run', tarball, '--strict']);
    expect(lint.stdout).toContain('All good!');
  });

  describe('installed from the registry next to better-sqlite3 in a fresh project', () => {
    const sqlite = (createRequire(import.meta.url)('better-sqlite3/package.json') as { version: string })
      .version;
    const apps = { esm: '', cjs: '' };
    const installs = { esm: '', cjs: '' };

    beforeAll(async () => {
      expect(sqlite).toMatch(/^12\./);
      // better-sqlite3's install script takes its binary from a local prebuild (the one this repository
      // built) instead of compiling it again for each project.
      const prebuilds = join(dir, 'prebuilds');
      mkdirSync(prebuilds);
      const asset = `better-sqlite3-v${sqlite}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
      await run('tar', ['-czf', join(prebuilds, asset), 'build/Release/better_sqlite3.node'], {
        cwd: join(root, 'node_modules', 'better-sqlite3'),
      });
      for (const kind of ['esm', 'cjs'] as const) {
        const app = join(dir, `${kind}-app`);
        mkdirSync(app);
        const type = kind === 'esm' ? 'module' : 'commonjs';
        writeFileSync(
          join(app, 'package.json'),
          JSON.stringify({ name: `${kind}-app`, private: true, type }),
        );
        writeFileSync(join(app, '.prebuild-installrc'), `local-prebuilds=${prebuilds}\n`);
        const { stdout, stderr } = await run(
          'npm',
          [
            'install',
            '--no-audit',
            '--no-fund',
            '--prefer-offline',
            join(dir, packed.filename),
            `better-sqlite3@${sqlite}`,
          ],
          { cwd: app },
        );
        apps[kind] = app;
        installs[kind] = `${stdout}${stderr}`;
      }
    }, 600_000);

    it('installs without an engine warning in either project', () => {
      expect(installs.esm).not.toMatch(/EBADENGINE/);
      expect(installs.cjs).not.toMatch(/EBADENGINE/);
    });

    it('runs the README example through import and through require(), one effect for three copies', async () => {
      writeFileSync(
        join(apps.esm, 'example.mjs'),
        `import { createRequire } from 'node:module';
         import Database from 'better-sqlite3';
         import { ConfigError, createEnvelope, createPipeline, OncemqError, PermanentError } from 'oncemq';
         import { SqliteLedger } from 'oncemq/sqlite';
         const other = createRequire(import.meta.url)('oncemq');
         ${EXAMPLE}`,
      );
      writeFileSync(
        join(apps.cjs, 'example.cjs'),
        `const Database = require('better-sqlite3');
         const { ConfigError, createEnvelope, createPipeline, OncemqError, PermanentError } = require('oncemq');
         const { SqliteLedger } = require('oncemq/sqlite');
         (async () => {
           const other = await import('oncemq');
           ${EXAMPLE}
         })().catch((error) => {
           console.error(error);
           process.exitCode = 1;
         });`,
      );
      for (const [app, file] of [
        [apps.esm, 'example.mjs'],
        [apps.cjs, 'example.cjs'],
      ] as const) {
        const { stdout } = await run(process.execPath, [file], { cwd: app });
        expect(JSON.parse(stdout), file).toEqual({
          actions: ['executed', 'duplicate (redelivery)', 'duplicate (republish)'],
          balance: 100,
          // The app loaded both builds: two classes per error...
          twoCopies: true,
          // ...and yet an error of the other build is one of this build's classes.
          refusedByOtherCopy: 'dead',
          // ...and a retry policy of the other build is the pipeline's policy, not a config read wrong.
          otherPolicyDelayMs: 5000,
          instanceAcross: true,
        });
      }
    });

    it('compiles against the types of every entry point in each TypeScript module mode, and runs', async () => {
      const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
      const modes: [app: string, config: string, options: Record<string, unknown>][] = [
        [apps.esm, 'tsconfig.nodenext.json', { module: 'nodenext', moduleResolution: 'nodenext' }],
        [
          apps.esm,
          'tsconfig.bundler.json',
          { module: 'preserve', moduleResolution: 'bundler', noEmit: true },
        ],
        // As a NestJS project is generated: module commonjs, which resolves as node10 (no "exports").
        [apps.cjs, 'tsconfig.commonjs.json', { module: 'commonjs', esModuleInterop: true }],
        [apps.cjs, 'tsconfig.nodenext.json', { module: 'nodenext', moduleResolution: 'nodenext' }],
      ];
      for (const app of [apps.esm, apps.cjs]) writeFileSync(join(app, 'check.ts'), TYPE_CHECK);
      for (const [app, config, options] of modes) {
        const outDir = `out-${config.split('.')[1] ?? ''}`;
        const compilerOptions = {
          target: 'es2022',
          strict: true,
          skipLibCheck: true,
          types: [],
          outDir,
          ...options,
        };
        writeFileSync(join(app, config), JSON.stringify({ compilerOptions, files: ['check.ts'] }));
        const compiled = await run(process.execPath, [tsc, '-p', config], { cwd: app }).catch(
          (error: unknown) => error as { stdout: string },
        );
        expect(compiled.stdout, `${app} ${config}`).toBe('');
        if (options.noEmit === true) continue;
        const main = `import(${JSON.stringify(`./${outDir}/check.js`)}).then(async (m) => console.log(await m.firstKind()))`;
        const { stdout } = await run(process.execPath, ['-e', main], { cwd: app });
        expect(stdout.trim(), `${app} ${config}`).toBe('executed');
      }
    });
  });
});

/**
 * The README example (examples/payment-to-points.ts) as plain JavaScript, with `other` the package
 * loaded the other way (`require()` from an ES module, `import()` from CommonJS): a handler throws that
 * copy's PermanentError, which must still skip the retries, and a pipeline retries on that copy's policy.
 */
const EXAMPLE = `
  const db = new Database(':memory:');
  db.exec('CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
  const consumer = createPipeline({
    ledger: new SqliteLedger({ database: db }),
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: (event, ctx) => {
      if (event.userId === 'mallory') throw new other.PermanentError('invalid', 'no points for mallory');
      ctx.tx
        .prepare('INSERT INTO points VALUES (?, 100) ON CONFLICT (user_id) DO UPDATE SET balance = balance + 100')
        .run(event.userId);
    },
  });
  const copy = (eventId, userId, brokerId, deliveryCount) =>
    createEnvelope({ brokerId, topic: 'payments', body: { eventId, userId }, deliveryCount });
  const actions = [];
  for (const envelope of [copy('pay-1', 'alice', 'offset-7', 1), copy('pay-1', 'alice', 'offset-7', 2), copy('pay-1', 'alice', 'offset-9', 1)]) {
    const outcome = await consumer.process(envelope);
    actions.push(outcome.kind === 'duplicate' ? 'duplicate (' + outcome.source + ')' : outcome.kind);
  }
  const { balance } = db.prepare('SELECT balance FROM points WHERE user_id = ?').get('alice');
  const refused = await consumer.process(copy('pay-2', 'mallory', 'offset-10', 1));
  const failing = createPipeline({
    ledger: new SqliteLedger({ database: db }),
    group: 'failing',
    key: { jsonPath: 'eventId' },
    retry: new other.RetryPolicy({ name: 'short', delays: ['5s'] }),
    handler: () => {
      throw new Error('down');
    },
  });
  const retried = await failing.process(copy('pay-3', 'bob', 'offset-11', 1));
  console.log(JSON.stringify({
    actions,
    balance,
    twoCopies: other.PermanentError !== PermanentError,
    refusedByOtherCopy: refused.kind,
    otherPolicyDelayMs: retried.delayMs,
    instanceAcross: new other.ConfigError('field', 'wrong') instanceof OncemqError && !(new other.ConfigError('f', 'm') instanceof PermanentError) && new ConfigError('f', 'm') instanceof other.ConfigError,
  }));
  db.close();
`;

/** A consumer's TypeScript: every entry point's declarations, and the pipeline typed end to end. */
const TYPE_CHECK = `${specifiers
  .map(
    (specifier, n) =>
      `import type * as entry${n} from '${specifier}';\n// @ts-expect-error: typed, so a name it does not export is an error\nexport type Missing${n} = entry${n}.NotExported;`,
  )
  .join('\n')}
import { createEnvelope, createPipeline } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';

export async function firstKind(): Promise<string> {
  const ledger = new SqliteLedger({ database: ':memory:' });
  const pipeline = createPipeline({ ledger, group: 'points', key: { jsonPath: 'eventId' }, handler: () => 'ok' });
  const outcome = await pipeline.process(createEnvelope({ brokerId: 'b-1', topic: 'payments', body: { eventId: 'e-1' } }));
  await ledger.close();
  // @ts-expect-error: the kind is one of the outcome kinds, not any string
  const none: 'none' = outcome.kind;
  return none;
}
`;
