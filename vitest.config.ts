import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (path: string): string => fileURLToPath(new URL(`./src/${path}`, import.meta.url));

/** The package's entry points (package.json "entryPoints": "." and "./sqlite", …), and nothing else. */
const manifest = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')) as {
  readonly entryPoints: readonly string[];
};

// `oncemq` and `oncemq/<entry>` resolve to the entry's source, as the package's "exports" resolve them
// to dist/: a path the package does not export (`oncemq/cli/…`) fails here as it would for a user.
const entries = manifest.entryPoints.map((subpath) =>
  subpath === '.'
    ? { find: /^oncemq$/, replacement: src('index.ts') }
    : { find: new RegExp(`^oncemq/${subpath.slice(2)}$`), replacement: src(`${subpath.slice(2)}.ts`) },
);

export default defineConfig({
  resolve: { alias: entries },
  test: {
    include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    globalSetup: [
      'test/support/brokers-setup.ts',
      'test/support/build-setup.ts',
      'test/support/prisma-generate.js',
    ],
  },
});
