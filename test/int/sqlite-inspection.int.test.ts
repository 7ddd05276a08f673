import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
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

describe('a SQLite ledger that does not migrate (migrate: false)', () => {
  const scratch = scratchFileEachTest('ledger.db');

  it('opens a table made by migrate, and refuses one at an older or a newer schema version, naming the fix', async () => {
    const migrated = new SqliteLedger({ database: scratch.path });
    await migrated.init();
    await migrated.close();
    const readOnly = new SqliteLedger({ database: scratch.path, migrate: false });
    await readOnly.init();
    expect(await readOnly.get('g', 'k')).toBeUndefined();
    await readOnly.close();

    const db = new Database(scratch.path);
    db.exec('DELETE FROM oncemq_ledger_schema');
    const older = new SqliteLedger({ database: db, migrate: false });
    await expect(older.init()).rejects.toThrow(
      /schema version 0, this oncemq needs 1; upgrade it with `oncemq migrate --store sqlite/,
    );
    db.exec('INSERT INTO oncemq_ledger_schema (version, applied_at) VALUES (1, 0), (2, 0)');
    const newer = new SqliteLedger({ database: db, migrate: false });
    const error: unknown = await newer.init().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(/schema version 2, newer than this oncemq knows \(1\)/);
    db.close();
  });
});
