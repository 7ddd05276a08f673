import { CompiledQuery, Kysely, MysqlDialect, type MysqlDialectConfig } from 'kysely';
import { createPool } from 'mysql2';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseLostError, LedgerUnavailableError } from 'oncemq';
import { kyselyLedger } from 'oncemq/kysely';
import { mysqlRequest, mysqlService, uniqueTable } from '../support/mysql.js';

const mysql = await mysqlService();

/**
 * What the session must keep for the ledger through Kysely's MysqlDialect: mysql2's default
 * CLIENT_FOUND_ROWS (Kysely answers an UPDATE with its affected-row count only, no `Rows matched`
 * text), and backslash escapes (the dialect runs every statement with mysql2's `query()`, which escapes
 * values into the SQL text).
 */
describe.skipIf(!mysql.available)('the Kysely ledger on MariaDB and the session it needs', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  async function openLedger(flags: string[], extra: Partial<MysqlDialectConfig> = {}) {
    const db = new Kysely<Record<string, never>>({
      dialect: new MysqlDialect({
        pool: createPool({ uri: mysql.url, connectionLimit: 2, flags }),
        ...extra,
      }),
    });
    const table = uniqueTable('kyselyf');
    const ledger = kyselyLedger(db, { table, clock: () => 1_000_000 });
    cleanups.push(async () => {
      await ledger.close();
      for (const name of [table, `${table}_schema`]) await db.schema.dropTable(name).ifExists().execute();
      await db.destroy();
    });
    await ledger.init();
    return ledger;
  }

  async function renewAtTheSameInstant(flags: string[]): Promise<unknown> {
    const ledger = await openLedger(flags);
    const first = await ledger.claim(mysqlRequest('evt-lease'));
    if (first.status !== 'acquired') throw new Error(`expected acquired, got ${first.status}`);
    // the same clock value: the UPDATE matches the owner's row and changes nothing
    return ledger.renew(first.claim, 30_000).then(
      (lease) => lease.leaseUntil.getTime(),
      (error: unknown) => error,
    );
  }

  it('renews a lease whose update changes nothing, under mysql2’s default flags', async () => {
    expect(await renewAtTheSameInstant([])).toBe(1_030_000);
  });

  it('takes that renew for a lost lease when the pool clears CLIENT_FOUND_ROWS (why the docs say to keep it)', async () => {
    expect(await renewAtTheSameInstant(['-FOUND_ROWS'])).toBeInstanceOf(LeaseLostError);
  });

  it('cannot store quotes and backslashes under NO_BACKSLASH_ESCAPES (why the docs say to keep it out of sql_mode)', async () => {
    const ledger = await openLedger([], {
      onCreateConnection: async (connection) => {
        await connection.executeQuery(
          CompiledQuery.raw("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')"),
        );
      },
    });
    expect((await ledger.transaction(mysqlRequest('plain'), () => null)).status).toBe('acquired');
    await expect(ledger.transaction(mysqlRequest("it's"), () => null)).rejects.toBeInstanceOf(
      LedgerUnavailableError,
    );
    expect((await ledger.transaction(mysqlRequest('a\\b'), () => null)).status).toBe('acquired');
    // the backslash is doubled on the way in (and in the lookup): the row holds another key
    expect((await ledger.get('points', 'a\\b'))?.key).toBe('a\\\\b');
  });
});
