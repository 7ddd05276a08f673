import { afterEach, describe, expect, it } from 'vitest';
import { SqliteLedger } from 'oncemq/sqlite';
import { scratchFileEachTest } from '../support/points.js';

describe('SQLite maintenance lock shared by processes on one file', () => {
  const scratch = scratchFileEachTest('ledger.db');
  const open: SqliteLedger[] = [];

  afterEach(async () => {
    await Promise.all(open.splice(0).map((ledger) => ledger.close()));
  });

  async function ledger(clock: () => number): Promise<SqliteLedger> {
    const instance = new SqliteLedger({ database: scratch.path, clock });
    open.push(instance);
    await instance.init();
    return instance;
  }

  it('frees the lock of a holder that died once its lease ends, and the dead holder cannot release the new one', async () => {
    let now = 1_000_000;
    const a = await ledger(() => now);
    const b = await ledger(() => now);
    const c = await ledger(() => now);
    const crashed = await a.tryMaintenanceLock();
    expect(crashed).toBeDefined();
    expect(await b.tryMaintenanceLock()).toBeUndefined();
    now += 60_000;
    const taken = await b.tryMaintenanceLock();
    expect(taken).toBeDefined();
    await crashed?.release();
    expect(await c.tryMaintenanceLock()).toBeUndefined();
    await taken?.release();
    const next = await c.tryMaintenanceLock();
    expect(next).toBeDefined();
    await next?.release();
  });

  it('declares the inspect capability and lists and resets rows', async () => {
    const now = 5_000;
    const l = await ledger(() => now);
    expect(l.capabilities.inspect).toBe(true);
    await l.recordFailure(
      { group: 'g', key: 'k', fingerprint: null, brokerId: 'b', topic: 't', leaseMs: 1000 },
      'broken',
    );
    expect(await l.list({ status: 'FAIL' })).toMatchObject([{ key: 'k', remark: 'broken' }]);
    expect(await l.reset('g', 'k')).toBe(true);
    expect(await l.list({})).toEqual([]);
  });
});
