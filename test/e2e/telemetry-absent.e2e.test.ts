// Without `@opentelemetry/api`, oncemq's telemetry is a no-op: a child process whose module
// resolution refuses every `@opentelemetry/*` package publishes through the local broker and runs a
// pipeline to its effect, the same as a process where the API is installed.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;

const HIDE_OTEL = `
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('@opentelemetry/')) {
    const error = new Error("Cannot find package '" + specifier + "'");
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}
`;

const REGISTER = `
import { register } from 'node:module';
register(new URL('./hide-otel.mjs', import.meta.url));
`;

const SCRIPT = `
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createPipeline, openTelemetryStatus } from 'oncemq';
import { LocalBroker } from 'oncemq/local';
import { SqliteLedger } from 'oncemq/sqlite';
const api = await import('@opentelemetry/api').then(() => 'importable', () => 'not importable');
const broker = new LocalBroker({ path: join(process.argv[2], 'broker.db'), pollInterval: '2ms' });
const db = new Database(':memory:');
const ledger = new SqliteLedger({ database: db });
const effects = [];
const pipeline = createPipeline({ ledger, group: 'g', handler: (message) => { effects.push(message.n); } });
const outcomes = [];
const subscription = await broker.subscribe('g', ['t'], { process: async (envelope) => {
  const outcome = await pipeline.process(envelope);
  outcomes.push({ kind: outcome.kind, traceparent: envelope.headers.traceparent ?? null });
  return outcome;
} });
await broker.publish({ topic: 't', key: 'k1', body: { n: 1 } });
await broker.publish({ topic: 't', key: 'k1', body: { n: 1 } });
while (outcomes.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
await subscription.close();
await broker.close();
await ledger.close();
console.log(JSON.stringify({ api, status: await openTelemetryStatus(), outcomes, effects }));
`;

describe('oncemq without @opentelemetry/api', () => {
  let dir: string;

  // Runs the built package (`npm run build` first, as for every e2e test).
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'oncemq-no-otel-'));
    writeFileSync(join(dir, 'hide-otel.mjs'), HIDE_OTEL);
    writeFileSync(join(dir, 'register.mjs'), REGISTER);
    // The script lives in the package root so that it resolves 'oncemq' and the drivers from there.
    writeFileSync(join(root, `.telemetry-absent-${process.pid}.mjs`), SCRIPT);
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(root, `.telemetry-absent-${process.pid}.mjs`), { force: true });
  });

  async function child(hidden: boolean) {
    const args = [
      ...(hidden ? ['--import', join(dir, 'register.mjs')] : []),
      join(root, `.telemetry-absent-${process.pid}.mjs`),
      mkdtempSync(join(dir, 'run-')),
    ];
    const { stdout } = await run(process.execPath, args, { cwd: root });
    return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as {
      api: string;
      status: string;
      outcomes: { kind: string; traceparent: string | null }[];
      effects: number[];
    };
  }

  it('publishes and processes to one effect, with no trace headers', async () => {
    const result = await child(true);
    expect(result.api).toBe('not importable');
    expect(result.status).toBe('absent');
    expect(result.outcomes).toEqual([
      { kind: 'executed', traceparent: null },
      { kind: 'duplicate', traceparent: null },
    ]);
    expect(result.effects).toEqual([1]);
  });

  it('finds the API where it is installed (the same script, resolution untouched)', async () => {
    const result = await child(false);
    expect(result.api).toBe('importable');
    expect(result.status).toBe('present');
    expect(result.effects).toEqual([1]);
  });
});
