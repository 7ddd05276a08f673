import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise';
import { afterAll } from 'vitest';
import { MysqlLedger } from 'oncemq/mysql';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { SqliteLedger } from 'oncemq/sqlite';
import { injectCommitFailures } from 'oncemq/testing';
import { describeCommitFailure } from '../support/commit-failure-scenario.js';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';
import { scratchDir } from '../support/points.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';

const USERS = ['user-0', 'user-1', 'user-2'];

// SQLite and PostgreSQL fail a real COMMIT: a grant must name an open account, checked only at COMMIT
// (a deferred foreign key), so closing the account makes every statement succeed and the COMMIT fail.

describeCommitFailure('a SQLite ledger (a deferred foreign key fails the real COMMIT)', async () => {
  const scratch = scratchDir();
  const db = new Database(join(scratch.dir, 'app.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.exec(`CREATE TABLE accounts (user_id TEXT PRIMARY KEY);
    CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL);
    CREATE TABLE grants (event_id TEXT NOT NULL,
      user_id TEXT NOT NULL REFERENCES accounts (user_id) DEFERRABLE INITIALLY DEFERRED)`);
  for (const user of USERS) db.prepare('INSERT INTO accounts (user_id) VALUES (?)').run(user);
  const ledger = new SqliteLedger<Database.Database>({ database: db });
  await ledger.init();
  const count = (sql: string, value: string): number => (db.prepare(sql).get(value) as { n: number }).n;
  return {
    ledger,
    commitError: /CommitRejectedError: .*FOREIGN KEY constraint failed/,
    refusedByDatabase: true,
    credit: (tx, event) => {
      tx.prepare(
        'INSERT INTO points VALUES (?, 100) ON CONFLICT (user_id) DO UPDATE SET balance = balance + 100',
      ).run(event.userId);
      tx.prepare('INSERT INTO grants (event_id, user_id) VALUES (?, ?)').run(event.eventId, event.userId);
    },
    breakCommits: (event) => {
      db.prepare('DELETE FROM accounts WHERE user_id = ?').run(event.userId);
      return Promise.resolve();
    },
    mendCommits: (event) => {
      db.prepare('INSERT INTO accounts (user_id) VALUES (?)').run(event.userId);
      return Promise.resolve();
    },
    balance: (userId) =>
      Promise.resolve(count('SELECT COALESCE(SUM(balance), 0) AS n FROM points WHERE user_id = ?', userId)),
    grants: (eventId) =>
      Promise.resolve(count('SELECT COUNT(*) AS n FROM grants WHERE event_id = ?', eventId)),
    close: async () => {
      await ledger.close();
      db.close();
      scratch.remove();
    },
  };
});

const postgres = await findPostgres();

describeCommitFailure(
  'a PostgreSQL ledger (a deferred foreign key fails the real COMMIT)',
  async () => {
    const pool = newPool(postgres.url, 4);
    const schema = scratchSchema();
    const q = (table: string): string => `"${schema}".${table}`;
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE ${q('accounts')} (user_id text PRIMARY KEY)`);
    await pool.query(`CREATE TABLE ${q('points')} (user_id text PRIMARY KEY, balance int NOT NULL)`);
    await pool.query(`CREATE TABLE ${q('grants')} (event_id text NOT NULL,
      user_id text NOT NULL REFERENCES ${q('accounts')} (user_id) DEFERRABLE INITIALLY DEFERRED)`);
    for (const user of USERS) await pool.query(`INSERT INTO ${q('accounts')} VALUES ($1)`, [user]);
    const ledger = new PostgresLedger({ pool, schema });
    await ledger.init();
    const count = async (sql: string, value: string): Promise<number> =>
      (await pool.query<{ n: number }>(sql, [value])).rows[0]?.n ?? 0;
    return {
      ledger,
      commitError: /CommitRejectedError: .*\[23503\]/,
      refusedByDatabase: true,
      credit: async (tx: PgClientLike, event) => {
        await tx.query(
          `INSERT INTO ${q('points')} VALUES ($1, 100)
           ON CONFLICT (user_id) DO UPDATE SET balance = points.balance + 100`,
          [event.userId],
        );
        await tx.query(`INSERT INTO ${q('grants')} VALUES ($1, $2)`, [event.eventId, event.userId]);
      },
      breakCommits: async (event) => {
        await pool.query(`DELETE FROM ${q('accounts')} WHERE user_id = $1`, [event.userId]);
      },
      mendCommits: async (event) => {
        await pool.query(`INSERT INTO ${q('accounts')} VALUES ($1)`, [event.userId]);
      },
      balance: (userId) =>
        count(`SELECT COALESCE(SUM(balance), 0)::int AS n FROM ${q('points')} WHERE user_id = $1`, userId),
      grants: (eventId) =>
        count(`SELECT COUNT(*)::int AS n FROM ${q('grants')} WHERE event_id = $1`, eventId),
      close: async () => {
        await dropSchema(pool, schema);
        await pool.end();
      },
    };
  },
  { skip: !postgres.available },
);

// MariaDB has no deferred constraints: the commit is made to fail by injectCommitFailures.

const mysql = await mysqlService();
let mysqlPool: Pool | undefined;
afterAll(async () => {
  await mysqlPool?.end();
});

describeCommitFailure(
  'a MariaDB ledger (injectCommitFailures fails the commit)',
  async () => {
    const pool = (mysqlPool ??= testPool(mysql.url, { size: 6 }));
    const table = uniqueTable('commit');
    const [points, grants] = [`${table}_points`, `${table}_grants`];
    await pool.query(`CREATE TABLE \`${points}\` (user_id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL)`);
    await pool.query(
      `CREATE TABLE \`${grants}\` (event_id VARCHAR(64) NOT NULL, user_id VARCHAR(64) NOT NULL)`,
    );
    const ledger = new MysqlLedger<PoolConnection>({ pool, table });
    await ledger.init();
    const broken = new Set<string>();
    const count = async (sql: string, value: string): Promise<number> => {
      const [rows] = await pool.execute<RowDataPacket[]>(sql, [value]);
      return Number(rows[0]?.n ?? 0);
    };
    return {
      ledger: injectCommitFailures(ledger, { commitFailure: (key) => broken.has(key) }),
      commitError: /injected fault commit-failure/,
      refusedByDatabase: false,
      credit: async (tx, event) => {
        await tx.execute(
          `INSERT INTO \`${points}\` VALUES (?, 100) ON DUPLICATE KEY UPDATE balance = balance + 100`,
          [event.userId],
        );
        await tx.execute(`INSERT INTO \`${grants}\` VALUES (?, ?)`, [event.eventId, event.userId]);
      },
      breakCommits: (event) => {
        broken.add(event.eventId);
        return Promise.resolve();
      },
      mendCommits: (event) => {
        broken.delete(event.eventId);
        return Promise.resolve();
      },
      balance: (userId) =>
        count(`SELECT COALESCE(SUM(balance), 0) AS n FROM \`${points}\` WHERE user_id = ?`, userId),
      grants: (eventId) => count(`SELECT COUNT(*) AS n FROM \`${grants}\` WHERE event_id = ?`, eventId),
      close: async () => {
        await dropLedgerTables(pool, table);
        await pool.query(`DROP TABLE IF EXISTS \`${points}\`, \`${grants}\``);
      },
    };
  },
  { skip: !mysql.available },
);
