import { join } from 'node:path';
import Database from 'better-sqlite3';
import { count, eq, sql } from 'drizzle-orm';
import { drizzle as drizzleSqlite, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleMysql, type MySql2Database } from 'drizzle-orm/mysql2';
import { mysqlTable, varchar } from 'drizzle-orm/mysql-core';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { pgSchema, text as pgText } from 'drizzle-orm/pg-core';
import { sqliteTable, text as sqliteText } from 'drizzle-orm/sqlite-core';
import mysql from 'mysql2/promise';
import type pg from 'pg';
import { afterAll, describe } from 'vitest';
import type { Ledger } from 'oncemq';
import { describeLedgerConformance } from 'oncemq/conformance';
import { drizzleLedger } from 'oncemq/drizzle';
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { scratchDir } from '../support/points.js';
import { findPostgres, newPool, scratchSchema } from '../support/postgres.js';

const postgres = await findPostgres();
const mysqlServer = await mysqlService();

type PgDb = NodePgDatabase & { $client: pg.Pool };
type PgTx = Parameters<Parameters<PgDb['transaction']>[0]>[0];
type MysqlDb = MySql2Database & { $client: mysql.Pool };
type MysqlTx = Parameters<Parameters<MysqlDb['transaction']>[0]>[0];
type SqliteDb = BetterSQLite3Database & { $client: Database.Database };

describe.skipIf(!postgres.available)('Drizzle on PostgreSQL (node-postgres)', () => {
  const adminPool = newPool(postgres.url, 2);
  const admin = drizzlePg(adminPool);
  afterAll(() => adminPool.end());

  describeLedgerConformance<PgTx>('drizzle (node-postgres)', {
    capabilities: drizzleLedger(admin).capabilities,
    construct: (table) => drizzleLedger(admin, { table }),
    async create() {
      const schema = scratchSchema('oncemq_drizzle');
      await admin.execute(sql.raw(`CREATE SCHEMA "${schema}"`));
      await admin.execute(sql.raw(`CREATE TABLE "${schema}".effects (key text NOT NULL)`));
      const effects = pgSchema(schema).table('effects', { key: pgText('key').notNull() });
      const pools: pg.Pool[] = [];
      return {
        async open(options = {}) {
          // a pool of its own per instance, so claims race on separate connections
          const pool = newPool(postgres.url, 4);
          pools.push(pool);
          const ledger = drizzleLedger(drizzlePg(pool), { schema, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (tx, key) => {
            await tx.insert(effects).values({ key });
          },
          count: async (key) => {
            const [row] = await admin.select({ n: count() }).from(effects).where(eq(effects.key, key));
            return row?.n ?? 0;
          },
        },
        async teardown() {
          await Promise.all(pools.map((pool) => pool.end()));
          await admin.execute(sql.raw(`DROP SCHEMA "${schema}" CASCADE`));
        },
      };
    },
  });
});

describe.skipIf(!mysqlServer.available)('Drizzle on MySQL/MariaDB (mysql2)', () => {
  const adminPool = mysql.createPool({ uri: mysqlServer.url, connectionLimit: 2 });
  const admin = drizzleMysql(adminPool);
  afterAll(() => adminPool.end());

  describeLedgerConformance<MysqlTx>('drizzle (mysql2)', {
    capabilities: drizzleLedger(admin).capabilities,
    construct: (table) => drizzleLedger(admin, { table }),
    async create() {
      const table = uniqueTable('drizzle');
      const name = `${table}_effects`;
      await admin.execute(sql.raw(`CREATE TABLE \`${name}\` (msg_key VARCHAR(255) NOT NULL)`));
      const effects = mysqlTable(name, { key: varchar('msg_key', { length: 255 }).notNull() });
      const pools: mysql.Pool[] = [];
      return {
        async open(options = {}) {
          const pool = mysql.createPool({ uri: mysqlServer.url, connectionLimit: 4 });
          pools.push(pool);
          const ledger = drizzleLedger(drizzleMysql(pool), { table, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (tx, key) => {
            await tx.insert(effects).values({ key });
          },
          count: async (key) => {
            const [row] = await admin.select({ n: count() }).from(effects).where(eq(effects.key, key));
            return row?.n ?? 0;
          },
        },
        async teardown() {
          await Promise.all(pools.map((pool) => pool.end()));
          for (const drop of [name, table, `${table}_schema`]) {
            await admin.execute(sql.raw(`DROP TABLE IF EXISTS \`${drop}\``));
          }
        },
      };
    },
  });
});

describe('Drizzle on SQLite (better-sqlite3)', () => {
  const effects = sqliteTable('effects', { key: sqliteText('key').notNull() });
  // a file, not ':memory:': a ledger in memory declares no concurrent connections
  const probeDir = scratchDir();
  const probe = drizzleSqlite(new Database(join(probeDir.dir, 'probe.db')));
  afterAll(() => {
    probe.$client.close();
    probeDir.remove();
  });

  describeLedgerConformance<SqliteDb>('drizzle (better-sqlite3)', {
    capabilities: drizzleLedger(probe).capabilities,
    // better-sqlite3 waits for another connection's write lock synchronously, blocking the event loop
    waitsForInflightTransactions: false,
    construct: (table) => drizzleLedger(probe, { table }),
    create() {
      const scratch = scratchDir();
      const path = join(scratch.dir, 'ledger.db');
      const app = drizzleSqlite(new Database(path));
      app.$client.exec('CREATE TABLE effects (key TEXT NOT NULL)');
      const clients: Database.Database[] = [];
      const ledgers: Ledger<SqliteDb>[] = [];
      return Promise.resolve({
        async open(options = {}) {
          // a connection of its own per instance, as the application would open it
          const client = new Database(path, { timeout: 5000 });
          client.pragma('journal_mode = WAL');
          clients.push(client);
          const ledger = drizzleLedger(drizzleSqlite(client), options);
          ledgers.push(ledger);
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: (db, key) => {
            db.insert(effects).values({ key }).run();
          },
          count: (key) =>
            Promise.resolve(
              app.select({ n: count() }).from(effects).where(eq(effects.key, key)).get()?.n ?? 0,
            ),
        },
        async teardown() {
          await Promise.all(ledgers.map((ledger) => ledger.close()));
          for (const client of clients) client.close();
          app.$client.close();
          scratch.remove();
        },
      });
    },
  });
});
