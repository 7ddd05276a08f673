import mysql2 from 'mysql2/promise';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, LedgerUnavailableError } from 'oncemq';
import type { MysqlConnectionLike } from 'oncemq/mysql';
import type { PgClientLike } from 'oncemq/postgres';
import { prismaBridge, type SqlBridge } from 'oncemq/prisma';
import { mysqlService } from '../support/mysql.js';
import { findPostgres } from '../support/postgres.js';
import {
  prismaMysqlDatabase,
  prismaPostgresSchema,
  type MysqlPrismaClient,
  type MysqlPrismaTx,
  type PostgresPrismaClient,
  type PostgresPrismaTx,
  type PrismaNamespace,
} from '../support/prisma.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** The error a promise rejects with. */
async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

describe.skipIf(!postgres.available)('the Prisma bridge on PostgreSQL answers as pg does', () => {
  let namespace: PrismaNamespace<PostgresPrismaClient>;
  let prisma: PostgresPrismaClient;
  let table: string;

  beforeEach(async () => {
    namespace = await prismaPostgresSchema(postgres.url);
    prisma = namespace.client();
    table = `"${namespace.name}".kv`;
    await namespace.query(`CREATE TABLE ${table} (k text PRIMARY KEY, n bigint, b bytea, d numeric)`);
  });

  afterEach(async () => {
    await namespace.drop();
  });

  const bridge = (): SqlBridge<PgClientLike, PostgresPrismaTx> =>
    prismaBridge(prisma) as SqlBridge<PgClientLike, PostgresPrismaTx>;
  const inTransaction = <T>(work: (client: PgClientLike) => Promise<T>): Promise<T> =>
    bridge().transaction((client) => work(client));

  it('answers rows and rowCount for reads, inserts with and without RETURNING, and updates', async () => {
    await inTransaction(async (client) => {
      const insert = `INSERT INTO ${table} (k, n, b, d) VALUES ($1, $2, $3, $4) ON CONFLICT (k) DO NOTHING`;
      expect(await client.query(insert, ['a', 9007199254740993n, Buffer.from('hi'), '1.50'])).toMatchObject({
        rows: [],
        rowCount: 1,
      });
      expect((await client.query(insert, ['a', 1, null, null])).rowCount).toBe(0);
      const returning = await client.query(
        `INSERT INTO ${table} (k) VALUES ($1), ($2) ON CONFLICT (k) DO NOTHING RETURNING k`,
        ['a', 'b'],
      );
      expect(returning).toMatchObject({ rows: [{ k: 'b' }], rowCount: 1 });
      // a RETURNING in a string literal does not make an UPDATE answer rows: its count is kept
      const update = await client.query(
        `UPDATE ${table} SET d = 2 WHERE k <> 'returning' AND k IN ($1, $2)`,
        ['a', 'b'],
      );
      expect(update).toMatchObject({ rows: [], rowCount: 2 });
      const { rows, rowCount } = await client.query(`SELECT k, n, b, d FROM ${table} WHERE k = $1`, ['a']);
      expect(rowCount).toBe(1);
      expect(rows[0]).toEqual({ k: 'a', n: '9007199254740993', b: Buffer.from('hi'), d: '2' });
    });
  });

  it('runs savepoints and DDL through the affected count, and a query of a void function answers no rows, its lock taken', async () => {
    await inTransaction(async (client) => {
      expect((await client.query('SAVEPOINT s1', [])).rowCount).toBe(0);
      await client.query(
        `CREATE TABLE "${namespace.name}".t1 (a int); CREATE INDEX ON "${namespace.name}".t1 (a)`,
        [],
      );
      expect((await client.query('RELEASE SAVEPOINT s1', [])).rowCount).toBe(0);
      expect(await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', ['k'])).toEqual({
        rows: [],
        rowCount: null,
      });
      const { rows } = await client.query(
        "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
        [],
      );
      expect(rows).toEqual([{ n: 1 }]);
    });
  });

  it('fails with the SQLSTATE as code, Prisma’s error as the cause', async () => {
    await namespace.query(`INSERT INTO ${table} (k) VALUES ('a')`);
    const error = await failure(
      inTransaction((client) => client.query(`INSERT INTO ${table} (k) VALUES ($1)`, ['a'])),
    );
    expect(error).toMatchObject({ code: '23505' });
    expect((error as Error).cause).toMatchObject({ code: 'P2010' });
  });

  it('refuses the PrismaClient where a transaction client is required', () => {
    expect(() => bridge().connection(prisma)).toThrow(ConfigError);
    expect(() => bridge().connection({} as PostgresPrismaTx)).toThrow(/expected a Prisma transaction client/);
  });

  it('reports a transaction that cannot start within maxWait as the ledger unavailable', async () => {
    const one = namespace.client({ max: 1 });
    const slow = prismaBridge(one, { transactionOptions: { maxWait: 100 } }) as SqlBridge<
      PgClientLike,
      PostgresPrismaTx
    >;
    let release = (): void => undefined;
    const held = slow.transaction(() => new Promise<void>((resolve) => (release = resolve)));
    const error = await failure(slow.transaction(() => Promise.resolve()));
    release();
    await held;
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect((error as Error).message).toMatch(/did not start within maxWait/);
  });
});

describe.skipIf(!mysql.available)('the Prisma bridge on MariaDB answers as mysql2 does', () => {
  let namespace: PrismaNamespace<MysqlPrismaClient>;
  let prisma: MysqlPrismaClient;

  beforeEach(async () => {
    namespace = await prismaMysqlDatabase(mysql.url);
    prisma = namespace.client();
    await namespace.query(
      'CREATE TABLE kv (k VARBINARY(64) PRIMARY KEY, attempt INT NOT NULL DEFAULT 1, n BIGINT NULL, d DECIMAL(6,2) NULL)',
    );
  });

  afterEach(async () => {
    await namespace.drop();
  });

  const bridge = (): SqlBridge<MysqlConnectionLike, MysqlPrismaTx> =>
    prismaBridge(prisma) as SqlBridge<MysqlConnectionLike, MysqlPrismaTx>;
  const claim = 'INSERT INTO kv (k) VALUES (?) ON DUPLICATE KEY UPDATE attempt = LAST_INSERT_ID(attempt)';
  /** The OK packet of a write, as mysql2 answers it. */
  const ok = (result: readonly [unknown, unknown]) => result[0] as { affectedRows: number; insertId: number };

  it('answers an INSERT’s insert id as the OK packet does: 0 for a new row, LAST_INSERT_ID(expr) for a duplicate, in a transaction and in autocommit', async () => {
    await bridge().transaction(async (conn) => {
      expect(ok(await conn.execute(claim, ['a']))).toEqual({ affectedRows: 1, insertId: 0 });
      await conn.execute('UPDATE kv SET attempt = 7 WHERE k = ?', ['a']);
      expect(ok(await conn.execute(claim, ['a'])).insertId).toBe(7);
      expect(ok(await conn.execute(claim, ['b'])).insertId).toBe(0);
    });
    const autocommit = bridge().autocommit;
    expect(ok(await autocommit.execute(claim, ['a'])).insertId).toBe(7);
    expect(ok(await autocommit.execute(claim, ['c'])).insertId).toBe(0);
  });

  it('counts the rows an UPDATE matched, changed or not, and reads binary as a Buffer, BIGINT as a number, DECIMAL as text', async () => {
    const conn = bridge().autocommit;
    await conn.execute('INSERT INTO kv (k, n, d) VALUES (?, ?, ?), (?, ?, ?)', ['a', 5, '1.5', 'b', 5, null]);
    expect(ok(await conn.execute('UPDATE kv SET n = ? WHERE n = ?', [5, 5])).affectedRows).toBe(2);
    const [rows] = await conn.execute('SELECT k, n, d FROM kv WHERE k = ?', ['a']);
    expect(rows).toEqual([{ k: Buffer.from('a'), n: 5, d: '1.5' }]);
  });

  it('fails with the error number and mysql2’s code: a duplicate key, a lock wait timeout', async () => {
    const conn = bridge().autocommit;
    await conn.execute('INSERT INTO kv (k) VALUES (?)', ['a']);
    const duplicate = await failure(conn.execute('INSERT INTO kv (k) VALUES (?)', ['a']));
    expect(duplicate).toMatchObject({ errno: 1062, code: 'ER_DUP_ENTRY' });
    const holder = await mysql2.createConnection({ uri: mysql.url, database: namespace.name });
    try {
      await holder.query('START TRANSACTION');
      await holder.query("SELECT * FROM kv WHERE k = 'a' FOR UPDATE");
      const timeout = await failure(
        bridge().transaction(async (tx) => {
          await tx.query('SET SESSION innodb_lock_wait_timeout = 1');
          await tx.execute('UPDATE kv SET attempt = 2 WHERE k = ?', ['a']);
        }),
      );
      expect(timeout).toMatchObject({ errno: 1205, code: 'ER_LOCK_WAIT_TIMEOUT' });
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });
});
