import { join } from 'node:path';
import { Kysely, MysqlDialect, PostgresDialect, sql, type Transaction } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { afterAll, describe } from 'vitest';
import { describeLedgerConformance } from 'oncemq/conformance';
import { kyselyLedger } from 'oncemq/kysely';
import { findPostgres, scratchSchema } from '../support/postgres.js';
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { scratchDir } from '../support/points.js';
import { kyselyOnSqlite } from '../support/sqlite-builders.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** The effects table of a PostgreSQL namespace (its schema set with withSchema). */
interface PgEffectsDb {
  effects: { key: string };
}

/** The effects table of a MySQL namespace, named after the ledger table. */
type MysqlEffectsDb = Record<string, { msg_key: string }>;

/** A Kysely instance of its own (its own pool), so claims through different instances race on separate connections. */
function connectPg(url: string, max = 4): Kysely<PgEffectsDb> {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return new Kysely<PgEffectsDb>({ dialect: new PostgresDialect({ pool }) });
}

/** The same on MySQL/MariaDB: Kysely takes mysql2's callback pool. */
function connectMysql(url: string, max = 4): Kysely<MysqlEffectsDb> {
  return new Kysely<MysqlEffectsDb>({
    dialect: new MysqlDialect({ pool: createPool({ uri: url, connectionLimit: max }) }),
  });
}

describe.skipIf(!postgres.available)('Kysely on PostgreSQL', () => {
  const admin = connectPg(postgres.url, 2);
  afterAll(() => admin.destroy());

  describeLedgerConformance<Transaction<PgEffectsDb>>('kysely (pg)', {
    capabilities: kyselyLedger(admin).capabilities,
    construct: (table) => kyselyLedger(admin, { table }),
    async create() {
      const schema = scratchSchema('oncemq_kysely');
      await sql`CREATE SCHEMA ${sql.id(schema)}`.execute(admin);
      await admin.schema
        .withSchema(schema)
        .createTable('effects')
        .addColumn('key', 'text', (c) => c.notNull())
        .execute();
      const instances: Kysely<PgEffectsDb>[] = [];
      return {
        async open(options = {}) {
          const db = connectPg(postgres.url);
          instances.push(db);
          const ledger = kyselyLedger(db, { schema, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (trx, key) => {
            await trx.withSchema(schema).insertInto('effects').values({ key }).execute();
          },
          count: async (key) => {
            const row = await admin
              .withSchema(schema)
              .selectFrom('effects')
              .where('key', '=', key)
              .select((eb) => eb.fn.countAll<string>().as('n'))
              .executeTakeFirst();
            return Number(row?.n ?? 0);
          },
        },
        async teardown() {
          await Promise.all(instances.map((db) => db.destroy()));
          await sql`DROP SCHEMA ${sql.id(schema)} CASCADE`.execute(admin);
        },
      };
    },
  });
});

describe.skipIf(!mysql.available)('Kysely on MySQL/MariaDB', () => {
  const admin = connectMysql(mysql.url, 2);
  afterAll(() => admin.destroy());

  describeLedgerConformance<Transaction<MysqlEffectsDb>>('kysely (mysql2)', {
    capabilities: kyselyLedger(admin).capabilities,
    construct: (table) => kyselyLedger(admin, { table }),
    async create() {
      const table = uniqueTable('kysely');
      const effects = `${table}_effects`;
      await admin.schema
        .createTable(effects)
        .addColumn('msg_key', 'varchar(255)', (c) => c.notNull())
        .execute();
      const instances: Kysely<MysqlEffectsDb>[] = [];
      return {
        async open(options = {}) {
          const db = connectMysql(mysql.url);
          instances.push(db);
          const ledger = kyselyLedger(db, { table, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (trx, key) => {
            await trx.insertInto(effects).values({ msg_key: key }).execute();
          },
          count: async (key) => {
            const row = await admin
              .selectFrom(effects)
              .where('msg_key', '=', key)
              .select((eb) => eb.fn.countAll<string>().as('n'))
              .executeTakeFirst();
            return Number(row?.n ?? 0);
          },
        },
        async teardown() {
          await Promise.all(instances.map((db) => db.destroy()));
          for (const name of [effects, table, `${table}_schema`]) {
            await admin.schema.dropTable(name).ifExists().execute();
          }
        },
      };
    },
  });
});

describe('Kysely on SQLite (better-sqlite3)', () => {
  // a file, not ':memory:': a ledger in memory declares no concurrent connections
  const probeDir = scratchDir();
  const probe = kyselyOnSqlite<PgEffectsDb>(join(probeDir.dir, 'probe.db'));
  afterAll(async () => {
    await probe.db.destroy();
    probeDir.remove();
  });

  describeLedgerConformance<Transaction<PgEffectsDb>>('kysely (better-sqlite3)', {
    capabilities: kyselyLedger(probe.db, { database: probe.database }).capabilities,
    construct: (table) => kyselyLedger(probe.db, { database: probe.database, table }),
    async create() {
      const scratch = scratchDir();
      const path = join(scratch.dir, 'ledger.db');
      const admin = kyselyOnSqlite<PgEffectsDb>(path);
      await admin.db.schema
        .createTable('effects')
        .addColumn('key', 'text', (c) => c.notNull())
        .execute();
      const instances: Kysely<PgEffectsDb>[] = [];
      return {
        async open(options = {}) {
          // a Kysely instance on a connection of its own, as another process would open it
          const { db, database } = kyselyOnSqlite<PgEffectsDb>(path);
          instances.push(db);
          const ledger = kyselyLedger(db, { database, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (trx, key) => {
            await trx.insertInto('effects').values({ key }).execute();
          },
          count: async (key) => {
            const row = await admin.db
              .selectFrom('effects')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('key', '=', key)
              .executeTakeFirst();
            return row?.n ?? 0;
          },
        },
        async teardown() {
          await Promise.all(instances.map((db) => db.destroy()));
          await admin.db.destroy();
          scratch.remove();
        },
      };
    },
  });
});
