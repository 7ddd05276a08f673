import { describe, expect, it } from 'vitest';
import { ConfigError } from 'oncemq';
import { prismaBridge, prismaLedger, type PrismaClientLike } from 'oncemq/prisma';
import { prismaTransactionOptions, statementKind } from '../support/internal.js';

describe('which statements answer rows', () => {
  const postgres: [string, string, boolean][] = [
    ['SELECT * FROM t WHERE a = $1', 'SELECT', true],
    ['  -- a comment\n  select 1', 'SELECT', true],
    ['(SELECT 1) UNION (SELECT 2)', 'SELECT', true],
    ['INSERT INTO t (a) VALUES ($1) ON CONFLICT (a) DO NOTHING', 'INSERT', false],
    ['INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING RETURNING a', 'INSERT', true],
    ["UPDATE t SET note = 'returning customer' WHERE a = $1", 'UPDATE', false],
    ['UPDATE t SET b = 1 /* RETURNING */ WHERE a = $1 -- RETURNING', 'UPDATE', false],
    ['UPDATE t SET b = $$ RETURNING $$ WHERE a = 1', 'UPDATE', false],
    ["UPDATE t SET b = E'it\\'s RETURNING' WHERE a = 1", 'UPDATE', false],
    ['UPDATE t SET "returning" = 1', 'UPDATE', false],
    ['WITH x AS (SELECT 1) SELECT * FROM x', 'SELECT', true],
    ['WITH x AS (DELETE FROM t RETURNING *) INSERT INTO u SELECT * FROM x', 'INSERT', false],
    ['WITH picked AS MATERIALIZED (SELECT id FROM t) UPDATE t SET a = 1 RETURNING id', 'UPDATE', true],
    ['DELETE FROM t WHERE ctid = ANY(ARRAY(SELECT ctid FROM t LIMIT 1))', 'DELETE', false],
    ['SAVEPOINT oncemq_claim', 'SAVEPOINT', false],
    ['CREATE TABLE t (a int); CREATE INDEX ON t (a)', 'CREATE', false],
    ['SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', 'SELECT', true],
  ];
  it.each(postgres)('PostgreSQL: %s', (sql, verb, returnsRows) => {
    expect(statementKind(sql, 'postgres')).toEqual({ verb, returnsRows });
  });

  const mysql: [string, string, boolean][] = [
    ['SELECT GET_LOCK(?, ?) AS locked', 'SELECT', true],
    ['# a comment\nSHOW TABLES', 'SHOW', true],
    [
      "SET STATEMENT sql_mode = 'STRICT_ALL_TABLES' FOR INSERT INTO t (a) VALUES (?) ON DUPLICATE KEY UPDATE a = LAST_INSERT_ID(a)",
      'INSERT',
      false,
    ],
    ["SET STATEMENT sql_mode = 'STRICT_ALL_TABLES' FOR SELECT 1", 'SELECT', true],
    ["UPDATE t SET b = 'it\\'s RETURNING' WHERE a = ?", 'UPDATE', false],
    ['DELETE FROM t WHERE a = ? RETURNING a', 'DELETE', true],
    ['REPLACE INTO t VALUES (1)', 'REPLACE', false],
    ['DO 0', 'DO', false],
    ['START TRANSACTION', 'START', false],
  ];
  it.each(mysql)('MySQL: %s', (sql, verb, returnsRows) => {
    expect(statementKind(sql, 'mysql')).toEqual({ verb, returnsRows });
  });
});

/** A client that only says its provider: the bridge reads nothing else until it runs a statement. */
function client(provider: unknown): PrismaClientLike {
  const fail = (): Promise<never> => Promise.reject(new Error('not connected'));
  return {
    _activeProvider: provider,
    $executeRawUnsafe: fail,
    $queryRawUnsafe: fail,
    $transaction: fail,
    $connect: fail,
  } as PrismaClientLike;
}

describe('the Prisma bridge’s configuration', () => {
  it('takes the database from the client’s provider, or from `provider`, and refuses the others', () => {
    expect(prismaBridge(client('postgresql')).database).toBe('postgres');
    expect(prismaBridge(client('mysql')).database).toBe('mysql');
    expect(prismaBridge(client(undefined), { provider: 'mysql' }).database).toBe('mysql');
    expect(() => prismaBridge(client('sqlite'))).toThrow(/Prisma provider "sqlite" has no oncemq ledger/);
    expect(() => prismaBridge(client('cockroachdb'))).toThrow(ConfigError);
    expect(() => prismaBridge(client('toString'))).toThrow(ConfigError);
    expect(() => prismaBridge(client(undefined))).toThrow(/pass provider/);
  });

  it('gives claims a 30s deadline unless told otherwise, Prisma twice that, and leaves maxWait and the isolation level to the client', () => {
    expect(prismaTransactionOptions()).toEqual({ deadlineMs: 30_000, prisma: { timeout: 60_000 } });
    expect(prismaTransactionOptions({ timeout: '2m', maxWait: 500, isolationLevel: 'Serializable' })).toEqual(
      {
        deadlineMs: 120_000,
        prisma: { timeout: 240_000, maxWait: 500, isolationLevel: 'Serializable' },
      },
    );
    expect(prismaTransactionOptions({ timeout: '20d' }).prisma.timeout).toBe(2 ** 31 - 1);
  });

  it('refuses transaction options Prisma or a timer cannot keep, naming the field', () => {
    expect(() => prismaTransactionOptions({ timeout: 0 })).toThrow(/transactionOptions\.timeout/);
    expect(() => prismaTransactionOptions({ timeout: '30d' })).toThrow(/transactionOptions\.timeout/);
    expect(() => prismaTransactionOptions({ maxWait: -1 })).toThrow(/transactionOptions\.maxWait/);
    expect(() => prismaTransactionOptions({ isolationLevel: 'Snapshot' as never })).toThrow(
      /transactionOptions\.isolationLevel: expected one of ReadUncommitted/,
    );
    expect(() => prismaLedger(client('postgresql'), { transactionOptions: { timeout: 'soon' } })).toThrow(
      ConfigError,
    );
  });

  it('refuses an option of the other database', () => {
    expect(() => prismaLedger(client('mysql'), { schema: 'billing' })).toThrow(/schema: is not an option/);
    expect(() => prismaLedger(client('postgresql'), { lockRetries: 2 })).toThrow(ConfigError);
  });
});
