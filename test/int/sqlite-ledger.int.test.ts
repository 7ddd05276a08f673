import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteLedger } from 'oncemq/sqlite';
import { describeLedgerConformance } from 'oncemq/conformance';
import { scratchDir } from '../support/points.js';

describeLedgerConformance<Database.Database>('sqlite', {
  capabilities: new SqliteLedger({ database: 'probe.db' }).capabilities,
  waitsForInflightTransactions: false,
  construct: (table) => new SqliteLedger({ database: ':memory:', table }),
  create() {
    const scratch = scratchDir();
    const path = join(scratch.dir, 'ledger.db');
    const app = new Database(path);
    app.exec('CREATE TABLE effects (key TEXT NOT NULL)');
    const ledgers: SqliteLedger<Database.Database>[] = [];
    return Promise.resolve({
      async open(options = {}) {
        const ledger = new SqliteLedger<Database.Database>({ database: path, ...options });
        ledgers.push(ledger);
        await ledger.init();
        return ledger;
      },
      effect: {
        apply: (tx, key) => void tx.prepare('INSERT INTO effects (key) VALUES (?)').run(key),
        count: (key) =>
          Promise.resolve(
            (app.prepare('SELECT COUNT(*) AS n FROM effects WHERE key = ?').get(key) as { n: number }).n,
          ),
      },
      async teardown() {
        await Promise.all(ledgers.map((ledger) => ledger.close()));
        app.close();
        scratch.remove();
      },
    });
  },
});
