import { parseArgs } from 'node:util';
import { UsageError, type Command } from '../command.js';
import { openStore, STORE_NAMES } from '../stores.js';

const usage = `Usage: oncemq migrate --store ${STORE_NAMES.join('|')} [--url URL] [--table NAME] [--json]

Creates or upgrades the ledger table (idempotent, versioned, one process at a time).

  --store S     the ledger's database: ${STORE_NAMES.join(', ')}
  --url URL     connection URL (database file path for sqlite); default: ONCEMQ_POSTGRES_URL /
                ONCEMQ_MYSQL_URL, else the loopback default
  --table NAME  ledger table (default oncemq_ledger)
  --json        print the result as one JSON object`;

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'create or upgrade the ledger table of a store',
  usage,
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: {
        store: { type: 'string' },
        url: { type: 'string' },
        table: { type: 'string' },
        json: { type: 'boolean', default: false },
      },
      strict: true,
      allowPositionals: true,
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
    if (values.store === undefined) throw new UsageError('--store is required');
    const store = await openStore(values.store, { url: values.url, table: values.table });
    try {
      await store.ledger.init();
    } finally {
      await store.close();
    }
    const table = values.table ?? 'oncemq_ledger';
    if (values.json) {
      console.log(JSON.stringify({ ok: true, store: values.store, location: store.location, table }));
    } else {
      console.log(`migrated: ${values.store} ledger table ${table} at ${store.location}`);
    }
    return 0;
  },
};
