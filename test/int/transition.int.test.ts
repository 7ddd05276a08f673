import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, transition, type ClaimRequest, type Ledger, type SqlDialect } from 'oncemq';
import { MysqlLedger, mysqlDialect } from 'oncemq/mysql';
import { PostgresLedger, postgresDialect } from 'oncemq/postgres';
import { SqliteLedger, sqliteDialect } from 'oncemq/sqlite';
import { findService } from '../support/services.js';
import { MYSQL_SERVICE } from '../support/mysql.js';

const postgres = await findService({
  variable: 'ONCEMQ_POSTGRES_URL',
  defaultUrl: 'postgres://postgres@127.0.0.1:5432/test',
});
const mariadb = await findService(MYSQL_SERVICE);

/** One database under test: a connection to pass as `tx`, plus raw SQL on the orders table. */
interface Target {
  /** The dialect exported for this database. */
  readonly dialect: SqlDialect<unknown>;
  /** Two independent connections (transactions race between them). */
  readonly tx: [unknown, unknown];
  readonly table: string;
  /** A transactional ledger on the same database, whose transactions the transition joins. */
  readonly ledger: Ledger;
  exec(sql: string): Promise<void>;
  statusOf(id: number): Promise<{ status: string; note: string | null } | undefined>;
  begin(tx: unknown): Promise<void>;
  commit(tx: unknown): Promise<void>;
  close(): Promise<void>;
}

const suffix = randomBytes(4).toString('hex');

const targets: { name: string; available: boolean; open: () => Promise<Target> }[] = [
  {
    name: 'SQLite (better-sqlite3)',
    available: true,
    open: () => {
      const db = new Database(':memory:');
      return Promise.resolve({
        dialect: sqliteDialect,
        tx: [db, db],
        table: 'orders',
        ledger: new SqliteLedger({ database: db }),
        exec: (sql) => Promise.resolve(void db.exec(sql)),
        statusOf: (id) =>
          Promise.resolve(
            db.prepare('SELECT status, note FROM orders WHERE id = ?').get(id) as
              { status: string; note: string | null } | undefined,
          ),
        begin: () => Promise.resolve(void db.exec('BEGIN')),
        commit: () => Promise.resolve(void db.exec('COMMIT')),
        close: () => Promise.resolve(void db.close()),
      });
    },
  },
  {
    name: 'PostgreSQL (pg)',
    available: postgres.available,
    open: async () => {
      const pool = new pg.Pool({ connectionString: postgres.url, max: 4 });
      const schema = `t_transition_${suffix}`;
      const [a, b] = [await pool.connect(), await pool.connect()];
      return {
        dialect: postgresDialect,
        tx: [a, b],
        table: `${schema}.orders`,
        ledger: new PostgresLedger({ pool, schema }),
        exec: async (sql) => {
          await pool.query(
            sql
              .replaceAll('orders', `${schema}.orders`)
              .replace('CREATE TABLE', `CREATE SCHEMA ${schema}; CREATE TABLE`),
          );
        },
        statusOf: async (id) =>
          (
            await pool.query<{ status: string; note: string | null }>(
              `SELECT status, note FROM ${schema}.orders WHERE id = $1`,
              [id],
            )
          ).rows[0],
        begin: async (tx) => {
          await (tx as pg.PoolClient).query('BEGIN');
        },
        commit: async (tx) => {
          await (tx as pg.PoolClient).query('COMMIT');
        },
        close: async () => {
          a.release();
          b.release();
          await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
          await pool.end();
        },
      };
    },
  },
  {
    name: 'MariaDB (mysql2, CLIENT_FOUND_ROWS off)',
    available: mariadb.available,
    open: async () => {
      const pool = mysql.createPool({ uri: mariadb.url, connectionLimit: 4, flags: ['-FOUND_ROWS'] });
      const table = `t_orders_${suffix}`;
      const [a, b] = [await pool.getConnection(), await pool.getConnection()];
      return {
        dialect: mysqlDialect,
        tx: [a, b],
        table,
        ledger: new MysqlLedger({ pool, table: `${table}_ledger` }),
        exec: async (sql) => {
          await pool.query(sql.replaceAll('orders', table));
        },
        statusOf: async (id) =>
          (
            (await pool.query(`SELECT status, note FROM ${table} WHERE id = ?`, [id]))[0] as {
              status: string;
              note: string | null;
            }[]
          )[0],
        begin: async (tx) => {
          await (tx as mysql.PoolConnection).query('START TRANSACTION');
        },
        commit: async (tx) => {
          await (tx as mysql.PoolConnection).query('COMMIT');
        },
        close: async () => {
          a.release();
          b.release();
          await pool.query(`DROP TABLE IF EXISTS ${table}, ${table}_ledger, ${table}_ledger_schema`);
          await pool.end();
        },
      };
    },
  },
];

for (const target of targets) {
  describe.skipIf(!target.available)(`transition() on ${target.name}`, () => {
    let t: Target;

    beforeAll(async () => {
      t = await target.open();
      await t.exec(
        'CREATE TABLE orders (id INTEGER PRIMARY KEY, status VARCHAR(20) NOT NULL, note VARCHAR(200), paid_by VARCHAR(50))',
      );
      await t.exec(
        "INSERT INTO orders (id, status) VALUES (1, 'PENDING'), (2, 'PAID'), (3, 'CANCELLED'), (4, 'PENDING'), (5, 'PENDING')",
      );
    });

    afterAll(async () => {
      await t.ledger.close();
      await t.close();
    });

    const claimOf = (key: string): ClaimRequest => ({
      group: 'orders',
      key,
      fingerprint: null,
      brokerId: key,
      topic: 'payments',
      leaseMs: 30_000,
    });

    const spec = (id: number, extra: object = {}) => ({
      table: t.table,
      idColumn: 'id',
      id,
      statusColumn: 'status',
      from: ['PENDING', 'AUTHORIZED'],
      to: 'PAID',
      ...extra,
    });

    it('applies a change from an allowed state and writes the set columns with bound values', async () => {
      const hostile = "'; DROP TABLE orders; --";
      expect(
        await transition(t.dialect, t.tx[0], spec(1, { set: { note: hostile, paid_by: 'card' } })),
      ).toEqual({
        status: 'applied',
      });
      expect(await t.statusOf(1)).toEqual({ status: 'PAID', note: hostile });
    });

    it('answers already for a row that is in the target state: a duplicate, nothing written', async () => {
      expect(await transition(t.dialect, t.tx[0], spec(2, { set: { note: 'second copy' } }))).toEqual({
        status: 'already',
      });
      expect(await t.statusOf(2)).toEqual({ status: 'PAID', note: null });
    });

    it('rejects a row in an abnormal state with its current status, and a missing row with null', async () => {
      expect(await transition(t.dialect, t.tx[0], spec(3))).toEqual({
        status: 'rejected',
        current: 'CANCELLED',
      });
      expect(await t.statusOf(3)).toMatchObject({ status: 'CANCELLED' });
      expect(await transition(t.dialect, t.tx[0], spec(99))).toEqual({ status: 'rejected', current: null });
    });

    it('accepts a single from state', async () => {
      expect(await transition(t.dialect, t.tx[0], spec(4, { from: 'PENDING', to: 'AUTHORIZED' }))).toEqual({
        status: 'applied',
      });
    });

    it.skipIf(target.name.startsWith('SQLite'))(
      'lets one of two concurrent transactions apply; the other waits and sees already',
      async () => {
        const [a, b] = t.tx;
        await t.begin(a);
        await t.begin(b);
        expect(await transition(t.dialect, a, spec(5))).toEqual({ status: 'applied' });
        const second = transition(t.dialect, b, spec(5));
        await new Promise((resolve) => setTimeout(resolve, 50));
        await t.commit(a);
        expect(await second).toEqual({ status: 'already' });
        await t.commit(b);
      },
    );

    it('refuses hostile identifiers before any SQL runs', async () => {
      const bad = [
        { table: 'orders; DROP TABLE orders' },
        { table: 'a.b.c' },
        { idColumn: 'id = id OR 1' },
        { statusColumn: 'status"' },
        { set: { 'note = note; --': 'x' } },
        { set: { status: 'PAID' } },
        { from: [] },
      ];
      for (const extra of bad) {
        await expect(transition(t.dialect, t.tx[0], spec(1, extra))).rejects.toBeInstanceOf(ConfigError);
      }
      expect(await t.statusOf(1)).toMatchObject({ status: 'PAID' });
    });

    it('refuses a missing dialect (a ledger without SQL has none) with a ConfigError naming it, before any SQL', async () => {
      await expect(transition(undefined, t.tx[0], spec(6))).rejects.toMatchObject({ field: 'dialect' });
      await expect(transition({} as SqlDialect<unknown>, t.tx[0], spec(6))).rejects.toBeInstanceOf(
        ConfigError,
      );
    });

    it("is the ledger's own dialect: ledger.dialect is the exported one for its database", () => {
      expect(t.ledger.dialect).toBe(t.dialect);
    });

    it("commits with the claim inside the ledger's transaction, and rolls back with it when the handler throws after it", async () => {
      const { ledger, dialect } = t;
      await t.exec("INSERT INTO orders (id, status) VALUES (10, 'PENDING'), (11, 'PENDING')");
      const applied = await ledger.transaction(claimOf('order-10'), async (tx) => {
        expect(await transition(dialect, tx, spec(10))).toEqual({ status: 'applied' });
        return null;
      });
      expect(applied.status).toBe('acquired');
      expect(await t.statusOf(10)).toMatchObject({ status: 'PAID' });
      await expect(
        ledger.transaction(claimOf('order-11'), async (tx) => {
          expect(await transition(dialect, tx, spec(11))).toEqual({ status: 'applied' });
          throw new Error('handler failed after the transition');
        }),
      ).rejects.toThrow('handler failed after the transition');
      expect(await t.statusOf(11)).toMatchObject({ status: 'PENDING' });
      expect(await ledger.get('orders', 'order-11')).toBeUndefined();
      const again = await ledger.transaction(claimOf('order-10'), async (tx) => {
        await transition(dialect, tx, spec(10));
        return null;
      });
      expect(again.status).toBe('duplicate');
    });
  });
}
