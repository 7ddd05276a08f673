import { parseArgs } from 'node:util';
import { formatTable, type Suite } from './harness.js';

const usage = `Usage: npm run bench -- <suite> [--json] [--seconds N] [--flag key=value ...]

Suites: sqlite, postgres, mysql, redis, local, outbox, transport, ordered, leases, pipeline, http, scale, sqs, memory.
Prints a table, or with --json one object {"suite", "results": [{name, concurrency, messagesPerSecond, p50Ms?, p99Ms?, ...}]}.
The transport and ordered suites are sized by --flag messages=N (not --seconds); see docs/bench.md.`;

const suites: Readonly<Record<string, () => Promise<Suite>>> = {
  sqlite: async () => (await import('./sqlite.js')).suite,
  redis: async () => (await import('./redis.js')).suite,
  postgres: async () => (await import('./postgres.js')).suite,
  mysql: async () => (await import('./mysql.js')).suite,
  local: async () => (await import('./local.js')).suite,
  outbox: async () => (await import('./outbox.js')).suite,
  transport: async () => (await import('./transport.js')).suite,
  ordered: async () => (await import('./ordered.js')).suite,
  leases: async () => (await import('./leases.js')).suite,
  pipeline: async () => (await import('./pipeline.js')).suite,
  http: async () => (await import('./http.js')).suite,
  scale: async () => (await import('./scale.js')).suite,
  sqs: async () => (await import('./sqs.js')).suite,
  memory: async () => (await import('./memory.js')).suite,
};

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  allowPositionals: true,
  options: {
    json: { type: 'boolean', default: false },
    seconds: { type: 'string' },
    flag: { type: 'string', multiple: true },
    help: { type: 'boolean', default: false },
  },
});
const name = positionals[0];
const load = name === undefined ? undefined : suites[name];
if (values.help || load === undefined) {
  console.error(name === undefined || values.help ? usage : `unknown suite '${name}'\n\n${usage}`);
  process.exit(values.help ? 0 : 2);
}
const seconds = values.seconds === undefined ? 30 : Number(values.seconds);
if (!(seconds > 0)) {
  console.error(`--seconds must be a positive number, got '${String(values.seconds)}'`);
  process.exit(2);
}
const flags: Record<string, string> = {};
for (const pair of values.flag ?? []) {
  const [key = '', ...rest] = pair.split('=');
  flags[key] = rest.join('=');
}
const suite = await load();
if (!values.json) console.error(`${suite.name}: ${suite.description} (~${seconds}s)`);
const results = await suite.run({ seconds, flags });
if (values.json) console.log(JSON.stringify({ suite: suite.name, results }));
else console.log(formatTable(suite.name, results));
