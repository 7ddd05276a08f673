import { parseArgs } from 'node:util';
import { FAULT_NAMES, parseFaults } from '../../testing/fault-injector.js';
import { positiveOption, UsageError, type Command } from '../command.js';
import { DEMO_RETRY, runDemo, type DemoResult } from '../demo-run.js';
import { DEMO_STORES } from '../demo-store.js';

const usage = `Usage: oncemq demo [options]

The payment-to-points scenario on the embedded broker: a producer publishes payment-succeeded
events (+100 points to the order's user), consumers in one group apply them on a ledger while a
seeded fault injector loses confirms and acks, crashes and rebalances consumers, crashes handlers
mid-write and slips in poison messages. Then every effect is checked against what was published.
Exits 0 only when no effect is doubled and none is lost.

  --events N       payment events to publish (default 10000)
  --users N        users the events are spread over (default events / 10)
  --consumers N    consumers in the group (default 4)
  --faults LIST    all, none, or names with optional rates: poison,handler-crash=0.1
                   (${FAULT_NAMES.join(', ')}; default all)
  --seed S         seed of the fault injector; same seed, same faults (default 1)
  --store NAME     ledger and business tables: ${DEMO_STORES.join(', ')} (default sqlite);
                   postgres and mysql run in a schema/database made for the run and dropped after it;
                   tiered puts Redis in front of the SQLite ledger (keys deleted after the run)
  --url URL        server of --store postgres|mysql|tiered (default: ONCEMQ_POSTGRES_URL /
                   ONCEMQ_MYSQL_URL / ONCEMQ_REDIS_URL, else the loopback server)
  --transport NAME broker: local (default local)
  --naive          consume without oncemq, to see what the faults do to a plain consumer
  --json           print one JSON object instead of the table

Retries use a demo schedule (${DEMO_RETRY.delaysMs.map((ms) => `${ms}ms`).join(', ')}, then the dead-letter queue).`;

const line = (label: string, value: string): string => `  ${label.padEnd(24)}${value}`;
const pairs = (record: Record<string, number>): string =>
  Object.entries(record)
    .map(([name, count]) => `${name} ${count}`)
    .join(' · ') || 'none';

function printTable(result: DemoResult): void {
  const mode = result.naive ? 'naive consumer (no oncemq)' : 'oncemq';
  console.log(
    `oncemq demo — payment-succeeded → +100 points · ${mode} · ${result.consumers} consumers · store ${result.store} · transport ${result.transport} · seed ${result.seed}`,
  );
  console.log(
    line('events published', `${result.events}${result.poison > 0 ? ` (+ ${result.poison} poison)` : ''}`),
  );
  console.log(line('users', String(result.users)));
  console.log(line('deliveries', String(result.deliveries)));
  console.log(line('effects applied', String(result.effects)));
  console.log(line('duplicates absorbed', pairs(result.duplicates)));
  console.log(line('dead-lettered', `${result.deadLettered} (${pairs(result.deadLetterReasons)})`));
  console.log(line('double effects', String(result.doubleEffects)));
  console.log(line('lost effects', String(result.lostEffects)));
  console.log(line('users with wrong points', String(result.usersWithWrongPoints)));
  if (result.ledgerRows !== null)
    console.log(line('ledger rows', `${result.ledgerRows} (expected ${result.events})`));
  if (result.cache !== null) {
    const { hits, misses, writes } = result.cache;
    console.log(line('redis cache', `hits ${hits} · misses ${misses} · writes ${writes}`));
  }
  console.log(line('faults injected', pairs(result.faults)));
  console.log(
    line('elapsed', `${(result.elapsedMs / 1000).toFixed(1)} s (${result.messagesPerSecond} deliveries/s)`),
  );
  if (result.ok) {
    console.log('OK: every event took effect exactly once; every poison message is in the dead-letter queue');
  } else {
    console.log('FAILED: the effects do not match the events');
    if (result.doubleKeys.length > 0)
      console.log(`  doubled, e.g. ${result.doubleKeys.slice(0, 5).join(', ')}`);
    if (result.lostKeys.length > 0) console.log(`  lost, e.g. ${result.lostKeys.slice(0, 5).join(', ')}`);
  }
}

function progressBar(): ((done: number, total: number) => void) | undefined {
  if (!process.stderr.isTTY) return undefined;
  const width = 30;
  return (done, total) => {
    const share = total === 0 ? 1 : done / total;
    const filled = Math.round(share * width);
    process.stderr.write(
      `\r  [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${String(Math.floor(share * 100)).padStart(3)}%  ${done}/${total} consumed`,
    );
  };
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'payment-to-points under injected faults, checked effect by effect (npm start)',
  usage,
  async run(args) {
    const { values } = parseArgs({
      args: [...args],
      options: {
        events: { type: 'string' },
        users: { type: 'string' },
        consumers: { type: 'string' },
        faults: { type: 'string', default: 'all' },
        seed: { type: 'string', default: '1' },
        store: { type: 'string', default: 'sqlite' },
        url: { type: 'string' },
        transport: { type: 'string', default: 'local' },
        naive: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      strict: true,
    });
    const events = positiveOption(values.events, 'events', 10_000);
    const users = positiveOption(values.users, 'users', Math.max(1, Math.ceil(events / 10)));
    const consumers = positiveOption(values.consumers, 'consumers', 4);
    if (values.transport !== 'local') {
      throw new UsageError(`--transport '${values.transport}' is not available in this build; use local`);
    }
    if (!(DEMO_STORES as readonly string[]).includes(values.store)) {
      throw new UsageError(
        `--store '${values.store}' is not available in this build; use ${DEMO_STORES.join(', ')}`,
      );
    }
    let faults;
    try {
      faults = parseFaults(values.faults);
    } catch (error) {
      throw new UsageError(`--faults: ${(error as Error).message}`);
    }
    const progress = values.json ? undefined : progressBar();
    const result = await runDemo({
      events,
      users,
      consumers,
      faults: faults.faults,
      rates: faults.rates,
      seed: values.seed,
      store: values.store,
      ...(values.url === undefined ? {} : { url: values.url }),
      transport: values.transport,
      naive: values.naive,
      onProgress: progress,
    });
    if (progress !== undefined) process.stderr.write('\n');
    if (values.json) {
      const { doubleKeys, lostKeys, ...shown } = result;
      console.log(JSON.stringify({ ...shown, doubleKeys, lostKeys }));
    } else {
      printTable(result);
    }
    return result.ok ? 0 : 1;
  },
};
