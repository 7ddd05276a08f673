import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (path: string): string => fileURLToPath(new URL(`./src/${path}`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^oncemq$/, replacement: src('index.ts') },
      { find: /^oncemq\/(.+)$/, replacement: src('$1.ts') },
    ],
  },
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
