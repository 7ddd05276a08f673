import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const up = (folders) => `(^|/)\\.\\./(\\.\\./)*(${folders})/`;
const CORE_ONLY = { regex: '^\\.\\./', message: 'core imports nothing of oncemq but core' };
const SQL_SHAPES_ONLY = { regex: '^\\.\\./', message: 'the SQL client shapes import nothing of oncemq' };
const TRANSPORT_ONLY = {
  regex: up('cli|ledger|consumer|outbox|orm|nest|testing'),
  message: 'a transport imports core, telemetry and the shared transport kit only',
};
const NO_OTHER_BROKER = {
  regex: '^\\.\\./(?!\\.\\./|ordered/)[^/]+/',
  message: 'no broker imports another: what two share goes to src/transport',
};
const LEDGER_ONLY = {
  regex: up('cli|consumer|transport|outbox|orm|nest|testing'),
  message: 'a ledger imports core and the SQL client shapes only',
};
const NO_CLI = { regex: up('cli|nest|testing'), message: 'only the command line imports the command line' };
const NO_SOURCE = {
  regex: up('src'),
  message:
    "tests and examples import what users import ('oncemq', 'oncemq/<entry>'); internals go through test/support/internal.ts",
};

/** One `no-restricted-imports` block per zone: its files (but `ignores`) may not import what matches `forbid`. */
function importZones(zones) {
  return zones.map(({ files, ignores = [], forbid }) => ({
    files,
    ignores,
    rules: { 'no-restricted-imports': ['error', { patterns: forbid }] },
  }));
}

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'dist-bench/**',
      'node_modules/**',
      'coverage/**',
      'api-docs/**',
      'examples/nest-app/**',
      'test/support/prisma/generated/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/no-unnecessary-condition': ['error', { allowConstantLoopConditions: true }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      // Nest modules are decorated classes with nothing in them.
      '@typescript-eslint/no-extraneous-class': ['error', { allowWithDecorator: true }],
    },
  },
  // Imports follow the folders (docs/architecture.md): a wrong one fails the lint. A file in two
  // zones takes the last one's rule, so a zone inside another repeats the outer zone's patterns.
  ...importZones([
    { files: ['src/core/**'], forbid: [CORE_ONLY] },
    { files: ['src/sql/**'], forbid: [SQL_SHAPES_ONLY] },
    { files: ['src/transport/**'], forbid: [TRANSPORT_ONLY] },
    { files: ['src/transport/*/**'], forbid: [TRANSPORT_ONLY, NO_OTHER_BROKER] },
    { files: ['src/ledger/**'], forbid: [LEDGER_ONLY] },
    {
      files: ['src/outbox/**', 'src/consumer/**', 'src/telemetry/**', 'src/orm/**', 'src/http/**'],
      forbid: [NO_CLI],
    },
    { files: ['test/**', 'examples/**'], ignores: ['test/support/internal.ts'], forbid: [NO_SOURCE] },
  ]),
  {
    files: ['**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
