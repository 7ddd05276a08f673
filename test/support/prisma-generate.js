// Generates the Prisma clients of the tests and the example from test/support/prisma/<name>.prisma into
// test/support/prisma/generated/<name>/ (git-ignored), once per schema and Prisma version: run by
// `npm run typecheck` (its pre-script, the first step of `npm test`) and vitest (globalSetup), so a fresh clone
// type-checks and tests with no step of its own. Offline: `prisma generate` needs no engine, but the
// CLI fetches the schema engine when it starts unless PRISMA_SCHEMA_ENGINE_BINARY names one; it is
// never run by generate, so /bin/false stands in. `node test/support/prisma-generate.js` runs it by hand.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL, URL } from 'node:url';

const require = createRequire(import.meta.url);
const schemas = fileURLToPath(new URL('./prisma/', import.meta.url));
const STAMP = '.oncemq-generated';

/** The installed CLI and its version, or undefined when prisma is not installed (npm ci --omit=dev). */
function prismaCli() {
  try {
    const manifest = require.resolve('prisma/package.json');
    const { version } = JSON.parse(readFileSync(manifest, 'utf8'));
    return { cli: join(manifest, '..', 'build', 'index.js'), version };
  } catch {
    return undefined;
  }
}

function generate(cli, schema) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, 'generate', '--schema', schema], {
      env: {
        ...process.env,
        PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? '/bin/false',
        CHECKPOINT_DISABLE: '1',
        PRISMA_HIDE_UPDATE_MESSAGE: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`prisma generate --schema ${schema} failed:\n${output}`)),
    );
  });
}

/** Generates every schema whose client is missing or was generated from another text or Prisma version. */
export async function generatePrismaClients() {
  const prisma = prismaCli();
  if (prisma === undefined) {
    console.warn('prisma is not installed: the Prisma clients of the tests are not generated');
    return;
  }
  const pending = readdirSync(schemas)
    .filter((file) => file.endsWith('.prisma'))
    .map((file) => {
      const schema = join(schemas, file);
      const output = join(schemas, 'generated', file.slice(0, -'.prisma'.length));
      const stamp = createHash('sha256')
        .update(`${prisma.version}\n${readFileSync(schema, 'utf8')}`)
        .digest('hex');
      return { schema, output, stamp };
    })
    .filter(
      ({ output, stamp }) =>
        !existsSync(join(output, STAMP)) || readFileSync(join(output, STAMP), 'utf8') !== stamp,
    );
  await Promise.all(
    pending.map(async ({ schema, output, stamp }) => {
      await generate(prisma.cli, schema);
      writeFileSync(join(output, STAMP), stamp);
    }),
  );
}

/** Vitest global setup. */
export default async function setup() {
  await generatePrismaClients();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await generatePrismaClients();
}
