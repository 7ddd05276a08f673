import Database from 'better-sqlite3';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { MySqlDialect } from 'drizzle-orm/mysql-core';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { PgDatabase, PgDialect } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { drizzleBridge, drizzleLedger, type DrizzleLike } from 'oncemq/drizzle';
import { drizzleStatement } from '../support/internal.js';

const pg = new PgDialect();
const mysql = new MySqlDialect();

describe('a ledger statement as a Drizzle SQL object', () => {
  it('binds each $n of PostgreSQL text as a parameter that Drizzle numbers again, a value used twice bound twice', () => {
    const query = pg.sqlToQuery(
      drizzleStatement(
        'UPDATE t SET a = $2, b = $1 WHERE k = $1 AND $10 IS NULL',
        'abcdefghij'.split(''),
        'numbered',
      ),
    );
    expect(query.sql).toBe('UPDATE t SET a = $1, b = $2 WHERE k = $3 AND $4 IS NULL');
    expect(query.params).toEqual(['b', 'a', 'a', 'j']);
  });

  it('keeps values out of the text: quotes, semicolons and arrays arrive as parameters, as they are', () => {
    const hostile = "x'); DROP TABLE t; --";
    const query = pg.sqlToQuery(
      drizzleStatement('SELECT $1::text, $2::text[]', [hostile, '{"a","b"}'], 'numbered'),
    );
    expect(query.sql).toBe('SELECT $1::text, $2::text[]');
    expect(query.params).toEqual([hostile, '{"a","b"}']);
  });

  it('leaves $n inside PostgreSQL quotes and a ? operator as text', () => {
    const query = pg.sqlToQuery(
      drizzleStatement(`SELECT '$1', "col$2", 'it''s $1', 'a\\' , doc ? 'k', $1`, ['v'], 'numbered'),
    );
    expect(query.sql).toBe(`SELECT '$1', "col$2", 'it''s $1', 'a\\' , doc ? 'k', $1`);
    expect(query.params).toEqual(['v']);
  });

  it('binds each ? of MySQL text in order, and leaves those inside quotes (backslash escapes included) as text', () => {
    const query = mysql.sqlToQuery(
      drizzleStatement("SELECT ?, 'a?b', 'it\\'s ?', `c?`, ?", [1, null], 'ordered'),
    );
    expect(query.sql).toBe("SELECT ?, 'a?b', 'it\\'s ?', `c?`, ?");
    expect(query.params).toEqual([1, null]);
  });

  it('binds a missing value as NULL', () => {
    expect(pg.sqlToQuery(drizzleStatement('SELECT $1, $2', ['a'], 'numbered')).params).toEqual(['a', null]);
  });
});

describe('drizzleLedger and drizzleBridge refuse what they cannot run on', () => {
  it('refuses a transaction where the database is expected, naming join, by Drizzle’s entity kind (as from another copy of drizzle-orm)', () => {
    const kind = Symbol.for('drizzle:entityKind');
    const pgTransaction = Object.assign(function PgTransaction() {}, { [kind]: 'PgTransaction' });
    const nodePgTransaction = Object.assign(function NodePgTransaction() {}, { [kind]: 'NodePgTransaction' });
    Object.setPrototypeOf(nodePgTransaction, pgTransaction);
    const transaction = Object.create(nodePgTransaction.prototype as object) as object;
    expect(() => drizzleLedger(transaction as unknown as DrizzleLike)).toThrow(
      /not a transaction.*ledger\.join/,
    );
  });

  it('refuses another Drizzle driver, and what is not Drizzle at all', () => {
    const other = new PgDatabase(pg, {} as never, undefined);
    expect(() => drizzleLedger(other as unknown as DrizzleLike)).toThrow(
      /a Drizzle PgDatabase: .*node-postgres/,
    );
    expect(() => drizzleLedger({} as unknown as DrizzleLike)).toThrow(/not a Drizzle database/);
    expect(() => drizzleLedger({} as unknown as DrizzleLike)).toThrow(ConfigError);
  });

  it('refuses a better-sqlite3 Drizzle database without its Database ($client), as drizzle.mock() makes', () => {
    expect(() => drizzleLedger(drizzleSqlite.mock())).toThrow(/no better-sqlite3 Database as its \$client/);
  });

  it('refuses a bridge on better-sqlite3, whose transactions are synchronous', () => {
    const db = drizzleSqlite(new Database(':memory:'));
    expect(() => drizzleBridge(db as unknown as DrizzleLike)).toThrow(/synchronous.*drizzleLedger\(db\)/);
    db.$client.close();
  });

  it('refuses an option of another database', () => {
    expect(() => drizzleLedger(drizzlePg.mock(), { database: 'app' })).toThrow(
      /database: is not an option of a postgres ledger/,
    );
    expect(() => drizzleLedger(drizzleMysql.mock(), { schema: 'app' })).toThrow(
      /schema: is not an option of a mysql ledger/,
    );
    const db = drizzleSqlite(new Database(':memory:'));
    expect(() => drizzleLedger(db, { partitioned: 'daily' })).toThrow(
      /partitioned: is not an option of a sqlite ledger/,
    );
    db.$client.close();
  });
});
