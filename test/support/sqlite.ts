import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Ledger } from 'oncemq';
import type { LedgerInstanceOptions, LedgerNamespace } from 'oncemq/conformance';
import { scratchDir } from './points.js';

/** Writes one effect through a claim's better-sqlite3 `Database`. */
const applyOnDatabase = (tx: unknown, key: string): void =>
  void (tx as Database.Database).prepare('INSERT INTO effects (key) VALUES (?)').run(key);

/**
 * A conformance namespace on a fresh SQLite file with an `effects` table. `ledgerOn` builds each
 * instance on the file; `teardown` closes them, then runs `afterClose`, then removes the file. `apply`
 * writes an effect through the claim's `tx` (by default a better-sqlite3 `Database`; an ORM's
 * transaction for a ledger through one).
 */
export function sqliteNamespace<Tx = Database.Database>(
  ledgerOn: (path: string, options: LedgerInstanceOptions) => Ledger<Tx> | Promise<Ledger<Tx>>,
  afterClose: () => Promise<unknown> = () => Promise.resolve(),
  apply: (tx: Tx, key: string) => void | Promise<void> = applyOnDatabase,
): Promise<LedgerNamespace<Tx>> {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'ledger.db');
  const app = new Database(path);
  app.exec('CREATE TABLE effects (key TEXT NOT NULL)');
  const ledgers: Ledger<Tx>[] = [];
  return Promise.resolve({
    async open(options = {}) {
      const ledger = await ledgerOn(path, options);
      ledgers.push(ledger);
      await ledger.init();
      return ledger;
    },
    effect: {
      apply,
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
