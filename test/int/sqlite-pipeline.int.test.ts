import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { LeaseLostError } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import {
  addPoints,
  balance,
  openPointsDb,
  payment,
  scratchDir,
  scratchFileEachTest,
  sleep,
} from '../support/points.js';
import { describePaymentToPoints, expectLeasedCopiesRunOnce } from '../support/points-scenario.js';

const event = payment(1);

describePaymentToPoints('a SQLite ledger', async () => {
  const scratch = scratchDir();
  const db = openPointsDb(join(scratch.dir, 'app.db'));
  const ledger = new SqliteLedger({ database: db });
  await ledger.init();
  return {
    ledger,
    addPoints: (tx: Database.Database, userId: string, amount: number) => {
      addPoints(tx, userId, amount);
    },
    balance: (userId) => Promise.resolve(balance(db, userId)),
    ledgerRows: () =>
      Promise.resolve((db.prepare('SELECT COUNT(*) AS n FROM oncemq_ledger').get() as { n: number }).n),
    close: async () => {
      await ledger.close();
      db.close();
      scratch.remove();
    },
  };
});

describe('leased mode on a SQLite ledger file shared by separate connections', () => {
  const scratch = scratchFileEachTest('ledger.db');

  it('runs the effect once for 20 concurrent deliveries of one key; the rest are busy or duplicate', async () => {
    const ledgers = Array.from({ length: 20 }, () => new SqliteLedger({ database: scratch.path }));
    await expectLeasedCopiesRunOnce(ledgers);
    await Promise.all(ledgers.map((ledger) => ledger.close()));
  });

  it('a naive check-then-insert consumer double-applies under the same concurrent deliveries', async () => {
    const dbs = Array.from({ length: 20 }, () => openPointsDb(scratch.path));
    dbs[0]?.exec('CREATE TABLE IF NOT EXISTS processed (event_id TEXT PRIMARY KEY)');
    const naive = async (db: Database.Database): Promise<void> => {
      const seen = db.prepare('SELECT 1 FROM processed WHERE event_id = ?').get(event.eventId);
      if (seen !== undefined) return;
      await sleep(20); // any await between check and act: a validation call, a lookup
      db.prepare('INSERT OR IGNORE INTO processed (event_id) VALUES (?)').run(event.eventId);
      addPoints(db, event.userId, 100);
    };
    await Promise.all(dbs.map((db) => naive(db)));
    expect(balance(dbs[0] as Database.Database, 'user-1')).toBeGreaterThan(100);
    for (const db of dbs) db.close();
  });

  it('reclaims a stale lease, and the old owner can no longer complete', async () => {
    let now = 1_000_000;
    const clock = (): number => now;
    const ledger = new SqliteLedger({ database: scratch.path, clock });
    await ledger.init();
    const request = {
      group: 'points',
      key: 'evt-1',
      fingerprint: 'fp',
      brokerId: 'b1',
      topic: 'payments',
      leaseMs: 30_000,
    };
    const first = await ledger.claim(request);
    expect(first.status).toBe('acquired');
    expect(await ledger.claim({ ...request, brokerId: 'b2' })).toMatchObject({ status: 'busy' });
    now += 30_001;
    const second = await ledger.claim({ ...request, brokerId: 'b2' });
    expect(second).toMatchObject({ status: 'reclaimed', claim: { attempt: 2 } });
    if (first.status !== 'acquired' || second.status !== 'reclaimed') throw new Error('unexpected claims');
    await expect(ledger.complete(first.claim, null)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(ledger.renew(first.claim, 30_000)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(ledger.release(first.claim)).rejects.toBeInstanceOf(LeaseLostError);
    await ledger.complete(second.claim, '"done"');
    expect(await ledger.get('points', 'evt-1')).toMatchObject({
      status: 'SUCCESS',
      attempt: 2,
      result: '"done"',
    });
    await ledger.close();
  });
});
