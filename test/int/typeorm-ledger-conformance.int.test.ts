import { DataSource, type EntityManager } from 'typeorm';
import { afterAll, beforeAll, describe } from 'vitest';
import { describeLedgerConformance } from 'oncemq/conformance';
import { typeormLedger } from 'oncemq/typeorm';
import { findPostgres, scratchSchema } from '../support/postgres.js';
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { sqliteNamespace } from '../support/sqlite.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** A data source of its own (its own pool), so claims through different sources race on separate connections. */
async function connect(type: 'postgres' | 'mysql', url: string, poolSize = 4): Promise<DataSource> {
  return new DataSource({ type, url, poolSize }).initialize();
}

describe.skipIf(!postgres.available)('TypeORM on PostgreSQL', () => {
  let admin: DataSource;
  beforeAll(async () => {
    admin = await connect('postgres', postgres.url, 2);
  });
  afterAll(() => admin.destroy());
  const offline = new DataSource({ type: 'postgres', url: postgres.url });

  describeLedgerConformance<EntityManager>('typeorm (pg)', {
    capabilities: typeormLedger(offline).capabilities,
    construct: (table) => typeormLedger(offline, { table }),
    async create() {
      const schema = scratchSchema('oncemq_typeorm');
      await admin.query(`CREATE SCHEMA "${schema}"`);
      await admin.query(`CREATE TABLE "${schema}".effects (key text NOT NULL)`);
      const sources: DataSource[] = [];
      return {
        async open(options = {}) {
          const dataSource = await connect('postgres', postgres.url);
          sources.push(dataSource);
          const ledger = typeormLedger(dataSource, { schema, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (manager, key) => {
            await manager
              .createQueryBuilder()
              .insert()
              .into(`${schema}.effects`, ['key'])
              .values({ key })
              .execute();
          },
          count: async (key) => {
            const rows: { n: number }[] = await admin.query(
              `SELECT COUNT(*)::int AS n FROM "${schema}".effects WHERE key = $1`,
              [key],
            );
            return rows[0]?.n ?? 0;
          },
        },
        async teardown() {
          await Promise.all(sources.map((dataSource) => dataSource.destroy()));
          await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
        },
      };
    },
  });
});

describe.skipIf(!mysql.available)('TypeORM on MySQL/MariaDB', () => {
  let admin: DataSource;
  beforeAll(async () => {
    admin = await connect('mysql', mysql.url, 2);
  });
  afterAll(() => admin.destroy());
  const offline = new DataSource({ type: 'mysql', url: mysql.url });

  describeLedgerConformance<EntityManager>('typeorm (mysql2)', {
    capabilities: typeormLedger(offline).capabilities,
    construct: (table) => typeormLedger(offline, { table }),
    async create() {
      const table = uniqueTable('typeorm');
      const effects = `${table}_effects`;
      await admin.query(`CREATE TABLE \`${effects}\` (msg_key VARCHAR(255) NOT NULL)`);
      const sources: DataSource[] = [];
      return {
        async open(options = {}) {
          const dataSource = await connect('mysql', mysql.url);
          sources.push(dataSource);
          const ledger = typeormLedger(dataSource, { table, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (manager, key) => {
            await manager
              .createQueryBuilder()
              .insert()
              .into(effects, ['msg_key'])
              .values({ msg_key: key })
              .execute();
          },
          count: async (key) => {
            const rows: { n: number | string }[] = await admin.query(
              `SELECT COUNT(*) AS n FROM \`${effects}\` WHERE msg_key = ?`,
              [key],
            );
            return Number(rows[0]?.n ?? 0);
          },
        },
        async teardown() {
          await Promise.all(sources.map((dataSource) => dataSource.destroy()));
          for (const name of [effects, table, `${table}_schema`])
            await admin.query(`DROP TABLE IF EXISTS \`${name}\``);
        },
      };
    },
  });
});

describe('TypeORM on SQLite (better-sqlite3)', () => {
  // a file, not ':memory:': a ledger in memory declares no concurrent connections
  const offline = new DataSource({ type: 'better-sqlite3', database: 'probe.db' });

  describeLedgerConformance<EntityManager>('typeorm (better-sqlite3)', {
    capabilities: typeormLedger(offline).capabilities,
    // better-sqlite3 waits for another connection's write lock synchronously, blocking the event loop
    waitsForInflightTransactions: false,
    construct: (table) => typeormLedger(offline, { table }),
    create() {
      const sources: DataSource[] = [];
      return sqliteNamespace<EntityManager>(
        async (path, options) => {
          // a data source of its own per instance: its own connection, as another process would have
          const dataSource = await new DataSource({ type: 'better-sqlite3', database: path }).initialize();
          sources.push(dataSource);
          return typeormLedger(dataSource, options);
        },
        () => Promise.all(sources.map((dataSource) => dataSource.destroy())),
        async (manager, key) => {
          await manager.createQueryBuilder().insert().into('effects', ['key']).values({ key }).execute();
        },
      );
    },
  });
});
