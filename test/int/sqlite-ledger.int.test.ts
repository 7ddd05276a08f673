import type Database from 'better-sqlite3';
import { SqliteLedger } from 'oncemq/sqlite';
import { describeLedgerConformance } from 'oncemq/conformance';
import { sqliteNamespace } from '../support/sqlite.js';

describeLedgerConformance<Database.Database>('sqlite', {
  capabilities: new SqliteLedger({ database: 'probe.db' }).capabilities,
  waitsForInflightTransactions: false,
  construct: (table) => new SqliteLedger({ database: ':memory:', table }),
  create: () =>
    sqliteNamespace((path, options) => new SqliteLedger<Database.Database>({ database: path, ...options })),
});
