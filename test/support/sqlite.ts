import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Ledger } from 'oncemq';
import type { LedgerInstanceOptions, LedgerNamespace } from 'oncemq/conformance';
import { scratchDir } from './points.js';

/**
 * A conformance namespace on a fresh SQLite file with an `effects` table. `ledgerOn` builds each
 * instance on the file; `teardown` closes them, then runs `afterClose`, then removes the file.
 */
export function sqliteNamespace(
  ledgerOn: (
    path: string,
    options: LedgerInstanceOptions,
  ) => Ledger<Database.Database> | Promise<Ledger<Database.Database>>,
  afterClose: () => Promise<void> = () => Promise.resolve(),
): Promise<LedgerNamespace<Database.Database>> {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'ledger.db');
  const app = new Database(path);
  app.exec('CREATE TABLE effects (key TEXT NOT NULL)');
  const ledgers: Ledger<Database.Database>[] = [];
  return Promise.resolve({
    async open(options = {}) {
      const ledger = await ledgerOn(path, options);
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
      await afterClose();
      app.close();
      scratch.remove();
    },
  });
}
