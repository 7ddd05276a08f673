import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPipeline, LedgerUnavailableError } from 'oncemq';
import { SqliteLedger } from 'oncemq/sqlite';
import { injectCommitFailures, InjectedFault, type CommitFaultHooks } from 'oncemq/testing';
import { addPoints, balance, payment, paymentEnvelope, pointsRequest } from '../support/points.js';

/** Fails the next commit of each key in `keys` once; records every key asked about. */
function failOnce(...keys: string[]): CommitFaultHooks & { readonly asked: string[] } {
  const pending = new Set(keys);
  const asked: string[] = [];
  return {
    asked,
    commitFailure: (key) => {
      asked.push(key);
      return pending.delete(key);
    },
  };
}

describe('injectCommitFailures', () => {
  let db: Database.Database;
  let ledger: SqliteLedger<Database.Database>;

  beforeEach(async () => {
    db = new Database(':memory:');
    db.exec('CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
    ledger = new SqliteLedger<Database.Database>({ database: db });
    await ledger.init();
  });

  afterEach(async () => {
    await ledger.close();
    db.close();
  });

  const credit = (tx: Database.Database): null => {
    addPoints(tx, 'user-1', 100);
    return null;
  };

  it("rolls back the claim and the handler's write of a chosen key, and lets its next commit through", async () => {
    const hooks = failOnce('evt-1');
    const failing = injectCommitFailures(ledger, hooks);
    const error: unknown = await failing.transaction(pointsRequest('evt-1'), credit).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect((error as Error).cause).toBeInstanceOf(InjectedFault);
    expect((error as Error).cause).toMatchObject({ fault: 'commit-failure' });
    expect(await ledger.get('points', 'evt-1')).toBeUndefined();
    expect(balance(db, 'user-1')).toBe(0);

    expect(await failing.transaction(pointsRequest('evt-1'), credit)).toMatchObject({ status: 'acquired' });
    expect(balance(db, 'user-1')).toBe(100);
    expect(await ledger.get('points', 'evt-1')).toMatchObject({ status: 'SUCCESS' });
    expect(hooks.asked).toEqual(['evt-1', 'evt-1']);
  });

  it('asks only once the handler succeeded: a throwing handler or a lost claim is no commit to fail', async () => {
    const hooks = failOnce();
    const failing = injectCommitFailures(ledger, hooks);
    await expect(
      failing.transaction(pointsRequest('evt-1'), () => {
        throw new Error('handler down');
      }),
    ).rejects.toThrow('handler down');
    await failing.transaction(pointsRequest('evt-2'), credit);
    expect(await failing.transaction(pointsRequest('evt-2'), credit)).toMatchObject({ status: 'duplicate' });
    expect(hooks.asked).toEqual(['evt-2']);
  });

  it('fails the commit of a whole batch when one of its won keys is chosen', async () => {
    const failing = injectCommitFailures(ledger, failOnce('evt-2'));
    const requests = ['evt-1', 'evt-2', 'evt-3'].map((key) => pointsRequest(key));
    const work = (tx: Database.Database, won: readonly unknown[]) => won.map(() => credit(tx));
    await expect(failing.transactionMany(requests, work)).rejects.toBeInstanceOf(LedgerUnavailableError);
    expect(balance(db, 'user-1')).toBe(0);
    expect(await ledger.get('points', 'evt-1')).toBeUndefined();

    const again = await failing.transactionMany(requests, work);
    expect(again.map((result) => result.status)).toEqual(['acquired', 'acquired', 'acquired']);
    expect(balance(db, 'user-1')).toBe(300);
  });

  it('does not write a chosen leased completion: the pipeline answers retry and the row stays PROCESSING', async () => {
    let runs = 0;
    const pipeline = createPipeline({
      ledger: injectCommitFailures(ledger, failOnce('evt-1')),
      group: 'points',
      mode: 'leased',
      key: { jsonPath: 'eventId' },
      handler: () => {
        runs++;
      },
    });
    expect(await pipeline.process(paymentEnvelope(payment(1)))).toMatchObject({
      kind: 'retry',
      action: 'retry',
    });
    expect(runs).toBe(1);
    expect(await ledger.get('points', 'evt-1')).toMatchObject({ status: 'PROCESSING' });
  });

  it("keeps the wrapped ledger's capabilities, properties and other methods", async () => {
    const failing = injectCommitFailures(ledger, failOnce());
    expect(failing.capabilities).toBe(ledger.capabilities);
    expect(failing.table).toBe(ledger.table);
    expect(failing.database).toBe(db);
    await failing.transaction(pointsRequest('evt-1'), credit);
    expect(await failing.list({ status: 'SUCCESS' })).toHaveLength(1);
  });
});
