import { parseArgs } from 'node:util';
import { UsageError, type Command } from '../command.js';
import { openStore, STORE_ARGS, STORE_NAMES, storeTarget, storeUsage } from '../stores.js';

const usage = `Usage: oncemq migrate --store ${STORE_NAMES.join('|')} [--url URL] [--table NAME] [--schema NAME] [--database NAME] [--json]

Creates or upgrades the ledger table (idempotent, versioned, one process at a time). On PostgreSQL
the schema is created too; on MySQL the database must exist.

${storeUsage()}
  --json           print the result as one JSON object`;

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'create or upgrade the ledger table of a store',
  usage,
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: { ...STORE_ARGS, json: { type: 'boolean', default: false } },
      strict: true,
      allowPositionals: true,
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
    if (values.store === undefined) throw new UsageError('--store is required');
    const store = await openStore(values.store, storeTarget(values, true));
    try {
      await store.ledger.init();
    } finally {
      await store.close();
    }
    const table = [values.schema ?? values.database, values.table ?? 'oncemq_ledger']
      .filter(Boolean)
      .join('.');
    if (values.json) {
      console.log(JSON.stringify({ ok: true, store: values.store, location: store.location, table }));
    } else {
      console.log(`migrated: ${values.store} ledger table ${table} at ${store.location}`);
    }
    return 0;
  },
};
