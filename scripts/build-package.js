#!/usr/bin/env node
// Builds the package into dist/ from src/ (docs/packaging.md):
//   dist/esm  ES modules and their declarations: every entry point, and the CLI (the bin);
//   dist/cjs  CommonJS and its declarations: the entry points and what they import, no CLI.
// The entry points are the "entryPoints" list of package.json, one subpath a line ("./sqlite" is
// src/sqlite.ts). The build writes "exports", "main", "types" and "typesVersions" from that list.
import { execFileSync } from 'node:child_process';
import console from 'node:console';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

/**
 * The module name of an entry point's subpath: "." is `index`, "./sqlite" is `sqlite`.
 * @param {string} subpath
 */
export function entryName(subpath) {
  if (subpath === '.') return 'index';
  if (!/^\.\/[a-z0-9][a-z0-9-]*(\/[a-z0-9][a-z0-9-]*)*$/.test(subpath) || subpath === './index') {
    throw new Error(`package.json entryPoints: "${subpath}" is not "." or "./kebab-name"`);
  }
  return subpath.slice(2);
}

/**
 * The fields of package.json that follow from its "entryPoints": where Node, TypeScript (every
 * module resolution) and bundlers find each entry point's code and declarations in either build.
 * @param {{ entryPoints: string[] }} manifest
 */
export function entryFields(manifest) {
  const exports = {};
  const typesVersions = {};
  for (const subpath of manifest.entryPoints) {
    const name = entryName(subpath);
    exports[subpath] = {
      import: { types: `./dist/esm/${name}.d.ts`, default: `./dist/esm/${name}.js` },
      require: { types: `./dist/cjs/${name}.d.ts`, default: `./dist/cjs/${name}.js` },
    };
    // `moduleResolution: node10` (a `module: commonjs` project) reads no "exports": subpaths come from here.
    if (subpath !== '.') typesVersions[name] = [`./dist/cjs/${name}.d.ts`];
  }
  exports['./package.json'] = './package.json';
  return {
    main: './dist/cjs/index.js',
    types: './dist/cjs/index.d.ts',
    typesVersions: { '*': typesVersions },
    exports,
  };
}

/**
 * package.json with its entry point fields written from "entryPoints" (other fields and their order kept).
 * @param {Record<string, unknown> & { entryPoints: string[] }} manifest
 */
export function withEntryFields(manifest) {
  return { ...manifest, ...entryFields(manifest) };
}

function compile(project, cwd) {
  execFileSync(process.execPath, [tsc, '-p', project], { cwd, stdio: 'inherit' });
}

/**
 * CommonJS: TypeScript emits CommonJS for `module: nodenext` sources under a `"type": "commonjs"`
 * package.json, and keeps their `import()` calls as they are (optional drivers, ES-module-only ones
 * among them, load through a real dynamic import in both builds). The sources are copied to a scratch
 * folder that has such a package.json: `src` itself stays ES modules. Compiled from there, errors name
 * the files `src/…` as in the repository.
 * @param {string[]} names
 */
function buildCommonJs(names) {
  const stage = mkdtempSync(join(tmpdir(), 'oncemq-cjs-'));
  try {
    cpSync(join(root, 'src'), join(stage, 'src'), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(stage, 'node_modules'), 'dir');
    writeFileSync(join(stage, 'package.json'), JSON.stringify({ private: true, type: 'commonjs' }));
    const config = {
      extends: join(root, 'tsconfig.json'),
      compilerOptions: {
        rootDir: 'src',
        outDir: join(root, 'dist', 'cjs'),
        declaration: true,
        sourceMap: false,
        // verbatimModuleSyntax asks CommonJS files for `import x = require()`; the sources are ES modules.
        verbatimModuleSyntax: false,
        paths: {},
      },
      // The entry points and what they import: the CLI stays out.
      files: names.map((name) => `src/${name}.ts`),
      include: [],
    };
    writeFileSync(join(stage, 'tsconfig.json'), JSON.stringify(config, null, 2));
    compile('tsconfig.json', stage);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
  writeFileSync(join(root, 'dist', 'cjs', 'package.json'), `${JSON.stringify({ type: 'commonjs' })}\n`);
}

function main() {
  const path = join(root, 'package.json');
  const text = readFileSync(path, 'utf8');
  const manifest = withEntryFields(JSON.parse(text));
  const names = manifest.entryPoints.map(entryName);
  const absent = names.filter((name) => !existsSync(join(root, 'src', `${name}.ts`)));
  if (absent.length > 0) throw new Error(`package.json entryPoints: no src/${absent.join('.ts, src/')}.ts`);
  const written = `${JSON.stringify(manifest, null, 2)}\n`;
  if (written !== text) {
    writeFileSync(path, written);
    console.log('package.json: exports, main, types and typesVersions written from entryPoints');
  }
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  compile('tsconfig.build.json', root);
  buildCommonJs(names);
  const missing = names
    .flatMap((name) =>
      ['esm', 'cjs'].flatMap((dir) => [`dist/${dir}/${name}.js`, `dist/${dir}/${name}.d.ts`]),
    )
    .filter((file) => !existsSync(join(root, file)));
  if (missing.length > 0) throw new Error(`the build left out ${missing.join(', ')}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
