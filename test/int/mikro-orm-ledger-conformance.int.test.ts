import { join } from 'node:path';
import { MikroORM as SqliteOrm, type EntityManager as SqliteEntityManager } from '@mikro-orm/better-sqlite';
import { MikroORM as MysqlOrm, type EntityManager as MysqlEntityManager } from '@mikro-orm/mysql';
import { MikroORM as PostgresOrm, type EntityManager as PostgresEntityManager } from '@mikro-orm/postgresql';
import { afterAll, describe } from 'vitest';
import { describeLedgerConformance } from 'oncemq/conformance';
import { mikroOrmLedger } from 'oncemq/mikro-orm';
import { findPostgres, scratchSchema } from '../support/postgres.js';
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { scratchDir } from '../support/points.js';
import { sqliteNamespace } from '../support/sqlite.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** MikroORM without entities: the suite writes through em.execute(). */
const options = (clientUrl: string, max: number) => ({
  clientUrl,
  pool: { min: 0, max },
  entities: [],
  discovery: { warnWhenNoEntities: false },
  connect: false,
});

/** An ORM of its own (its own pool), so claims through different ORMs race on separate connections. */
const connectPostgres = (max = 4) => PostgresOrm.init(options(postgres.url, max));
const connectMysql = (max = 4) => MysqlOrm.init(options(mysql.url, max));

describe.skipIf(!postgres.available)('MikroORM on PostgreSQL', async () => {
  const admin = await connectPostgres(2);
  afterAll(() => admin.close());

  describeLedgerConformance<PostgresEntityManager>('mikro-orm (postgresql)', {
    capabilities: mikroOrmLedger(admin.em).capabilities,
    construct: (table) => mikroOrmLedger(admin.em, { table }),
    async create() {
      const schema = scratchSchema('oncemq_mikro');
      await admin.em.execute(`CREATE SCHEMA "${schema}"`);
      await admin.em.execute(`CREATE TABLE "${schema}".effects (key text NOT NULL)`);
      const orms: { close(): Promise<void> }[] = [];
      return {
        async open(instanceOptions = {}) {
          const orm = await connectPostgres();
          orms.push(orm);
          const ledger = mikroOrmLedger(orm.em, { schema, ...instanceOptions });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (em, key) => {
            await em.execute(`INSERT INTO "${schema}".effects (key) VALUES (?)`, [key]);
          },
          count: async (key) => {
            const rows = await admin.em.execute<{ n: number }[]>(
              `SELECT COUNT(*)::int AS n FROM "${schema}".effects WHERE key = ?`,
              [key],
            );
            return rows[0]?.n ?? 0;
          },
        },
        async teardown() {
          await Promise.all(orms.map((orm) => orm.close()));
          await admin.em.execute(`DROP SCHEMA "${schema}" CASCADE`);
        },
      };
    },
  });
});

describe.skipIf(!mysql.available)('MikroORM on MySQL/MariaDB', async () => {
  const admin = await connectMysql(2);
  afterAll(() => admin.close());

  describeLedgerConformance<MysqlEntityManager>('mikro-orm (mysql)', {
    capabilities: mikroOrmLedger(admin.em).capabilities,
    construct: (table) => mikroOrmLedger(admin.em, { table }),
    async create() {
      const table = uniqueTable('mikro');
      const effects = `${table}_effects`;
      await admin.em.execute(`CREATE TABLE \`${effects}\` (msg_key VARCHAR(255) NOT NULL)`);
      const orms: { close(): Promise<void> }[] = [];
      return {
        async open(instanceOptions = {}) {
          const orm = await connectMysql();
          orms.push(orm);
          const ledger = mikroOrmLedger(orm.em, { table, ...instanceOptions });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (em, key) => {
            await em.execute(`INSERT INTO \`${effects}\` (msg_key) VALUES (?)`, [key]);
          },
          count: async (key) => {
            const rows = await admin.em.execute<{ n: number | string }[]>(
              `SELECT COUNT(*) AS n FROM \`${effects}\` WHERE msg_key = ?`,
              [key],
            );
            return Number(rows[0]?.n ?? 0);
          },
        },
        async teardown() {
          await Promise.all(orms.map((orm) => orm.close()));
          for (const name of [effects, table, `${table}_schema`]) {
            await admin.em.execute(`DROP TABLE IF EXISTS \`${name}\``);
          }
        },
      };
    },
  });
});

describe('MikroORM on SQLite (better-sqlite3)', async () => {
  // a file, not ':memory:': a ledger in memory declares no concurrent connections
  const probeDir = scratchDir();
  const probe = await SqliteOrm.init({ dbName: join(probeDir.dir, 'probe.db'), ...options('', 1) });
  afterAll(async () => {
    await probe.close();
    probeDir.remove();
  });

  describeLedgerConformance<SqliteEntityManager>('mikro-orm (better-sqlite)', {
    capabilities: mikroOrmLedger(probe.em).capabilities,
    // better-sqlite3 waits for another connection's write lock synchronously, blocking the event loop
    waitsForInflightTransactions: false,
    construct: (table) => mikroOrmLedger(probe.em, { table }),
    create() {
      const orms: { close(): Promise<void> }[] = [];
      return sqliteNamespace<SqliteEntityManager>(
        async (path, instanceOptions) => {
          // an ORM of its own per instance: its own connection, as another process would have
          const orm = await SqliteOrm.init({ dbName: path, ...options('', 1) });
          orms.push(orm);
          return mikroOrmLedger(orm.em, instanceOptions);
        },
        () => Promise.all(orms.map((orm) => orm.close())),
        async (em, key) => {
          await em.execute('INSERT INTO effects (key) VALUES (?)', [key]);
        },
      );
    },
  });
});
