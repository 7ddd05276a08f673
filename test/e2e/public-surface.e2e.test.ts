import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// The public surface of the built package (dist/, made by `npm run build`): the names each entry point
// exports, at run time through `import` and through `require()`, and in its declarations. It is compared
// with test/e2e/public-surface.json; a change on purpose is recorded with
//   npm run build && npx vitest run test/e2e/public-surface.e2e.test.ts -u
// and the diff of that file is what reviewers read (docs/packaging.md).

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

interface Target {
  readonly types: string;
  readonly default: string;
}
interface Manifest {
  readonly name: string;
  readonly entryPoints: readonly string[];
  readonly exports: Record<string, { import: Target; require: Target }>;
}

const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Manifest;
const specifier = (subpath: string): string =>
  subpath === '.' ? manifest.name : `${manifest.name}${subpath.slice(1)}`;
const specifiers = JSON.stringify(manifest.entryPoints.map((subpath) => [subpath, specifier(subpath)]));

/**
 * The runtime names of every entry point, loaded by the package's own name from the repository (Node
 * resolves a package's name inside it through its "exports"). vitest refuses `require()` (its CommonJS
 * entry throws), so the CommonJS side loads `oncemq/conformance` with vitest stubbed; the real refusal is
 * the test below.
 */
const LIST_REQUIRED = `
  const Module = require('node:module');
  const vitest = require.resolve('vitest');
  const stub = new Module(vitest);
  stub.filename = vitest;
  stub.loaded = true;
  stub.exports = {};
  require.cache[vitest] = stub;
  const names = {};
  for (const [subpath, specifier] of ${specifiers}) names[subpath] = Object.keys(require(specifier)).sort();
  console.log(JSON.stringify(names));
`;
const LIST_IMPORTED = `
  const names = {};
  for (const [subpath, specifier] of ${specifiers}) names[subpath] = Object.keys(await import(specifier)).sort();
  console.log(JSON.stringify(names));
`;

async function runtimeNames(mode: 'import' | 'require'): Promise<Record<string, string[]>> {
  const args = mode === 'import' ? ['--input-type=module', '-e', LIST_IMPORTED] : ['-e', LIST_REQUIRED];
  const { stdout } = await run(process.execPath, args, { cwd: root });
  return JSON.parse(stdout) as Record<string, string[]>;
}

/** Every name each declaration file exports, types included, as TypeScript reads it. */
function declaredNames(files: readonly string[]): Map<string, string[]> {
  const program = ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  });
  const checker = program.getTypeChecker();
  return new Map(
    files.map((file) => {
      const source = program.getSourceFile(file);
      const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
      if (module === undefined) throw new Error(`TypeScript read no module from ${file}`);
      return [
        file,
        checker
          .getExportsOfModule(module)
          .map((symbol) => symbol.name)
          .sort(),
      ];
    }),
  );
}

describe('the public surface of the built package', () => {
  it('exports the names recorded in public-surface.json, the same through import and require()', async () => {
    if (!existsSync(join(root, 'dist', 'cjs', 'index.js')))
      throw new Error('no dist/: run `npm run build` first');
    const [imported, required] = await Promise.all([runtimeNames('import'), runtimeNames('require')]);
    expect(required).toEqual(imported);

    const files = (subpath: string): [string, string] => {
      const entry = manifest.exports[subpath];
      if (entry === undefined) throw new Error(`package.json exports has no "${subpath}"`);
      return [join(root, entry.import.types), join(root, entry.require.types)];
    };
    const declared = declaredNames(manifest.entryPoints.flatMap(files));
    const surface: Record<string, { values: string[]; types: string[] }> = {};
    for (const subpath of manifest.entryPoints) {
      const [esm, cjs] = files(subpath).map((file) => declared.get(file) ?? []);
      expect(cjs, `the CommonJS declarations of ${subpath}`).toEqual(esm);
      const values = imported[subpath] ?? [];
      // Every runtime export is declared, with a type; the rest of the declared names are types only.
      expect(
        values.filter((name) => !esm?.includes(name)),
        `undeclared exports of ${subpath}`,
      ).toEqual([]);
      surface[subpath] = { values, types: (esm ?? []).filter((name) => !values.includes(name)) };
    }
    await expect(`${JSON.stringify(surface, null, 2)}\n`).toMatchFileSnapshot('./public-surface.json');
  }, 120_000); // 22 entry points loaded twice in child processes: slow on a busy machine

  it('leaves require() of oncemq/conformance to vitest, which refuses it with its own message', async () => {
    const loading = run(process.execPath, ['-e', `require('${specifier('./conformance')}')`], { cwd: root });
    await expect(loading).rejects.toThrow(/Vitest cannot be imported in a CommonJS module using require\(\)/);
  });
});
