import { join } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { afterAll, describe } from 'vitest';
import { describeLedgerConformance } from 'oncemq/conformance';
import { knexLedger } from 'oncemq/knex';
import { findPostgres, scratchSchema } from '../support/postgres.js';
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { scratchDir } from '../support/points.js';
import { knexOnSqlite } from '../support/sqlite-builders.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** A knex instance of its own (its own pool), so claims through different instances race on separate connections. */
function connect(client: 'pg' | 'mysql2', url: string, max = 4): Knex {
  return knexFactory({ client, connection: url, pool: { min: 0, max } });
}

describe.skipIf(!postgres.available)('Knex on PostgreSQL', () => {
  const admin = connect('pg', postgres.url, 2);
  afterAll(() => admin.destroy());

  describeLedgerConformance<Knex.Transaction>('knex (pg)', {
    capabilities: knexLedger(admin).capabilities,
    construct: (table) => knexLedger(admin, { table }),
    async create() {
      const schema = scratchSchema('oncemq_knex');
      await admin.raw(`CREATE SCHEMA "${schema}"`);
      await admin.schema.withSchema(schema).createTable('effects', (t) => t.text('key').notNullable());
      const instances: Knex[] = [];
      return {
        async open(options = {}) {
          const knex = connect('pg', postgres.url);
          instances.push(knex);
          const ledger = knexLedger(knex, { schema, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (trx, key) => {
            await trx.withSchema(schema).insert({ key }).into('effects');
          },
          count: async (key) => {
            const rows: { n: unknown }[] = await admin
              .withSchema(schema)
              .from('effects')
              .where({ key })
              .count({ n: '*' });
            return Number(rows[0]?.n ?? 0);
          },
        },
        async teardown() {
          await Promise.all(instances.map((knex) => knex.destroy()));
          await admin.raw(`DROP SCHEMA "${schema}" CASCADE`);
        },
      };
    },
  });
});

describe.skipIf(!mysql.available)('Knex on MySQL/MariaDB', () => {
  const admin = connect('mysql2', mysql.url, 2);
  afterAll(() => admin.destroy());

  describeLedgerConformance<Knex.Transaction>('knex (mysql2)', {
    capabilities: knexLedger(admin).capabilities,
    construct: (table) => knexLedger(admin, { table }),
    async create() {
      const table = uniqueTable('knex');
      const effects = `${table}_effects`;
      await admin.schema.createTable(effects, (t) => t.string('msg_key', 255).notNullable());
      const instances: Knex[] = [];
      return {
        async open(options = {}) {
          const knex = connect('mysql2', mysql.url);
          instances.push(knex);
          const ledger = knexLedger(knex, { table, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (trx, key) => {
            await trx.insert({ msg_key: key }).into(effects);
          },
          count: async (key) => {
            const rows: { n: unknown }[] = await admin
              .from(effects)
              .where({ msg_key: key })
              .count({ n: '*' });
            return Number(rows[0]?.n ?? 0);
          },
        },
        async teardown() {
          await Promise.all(instances.map((knex) => knex.destroy()));
          await admin.schema.dropTableIfExists(effects);
          await admin.schema.dropTableIfExists(table);
          await admin.schema.dropTableIfExists(`${table}_schema`);
        },
      };
    },
  });
});

describe('Knex on SQLite (better-sqlite3)', () => {
  // a file, not ':memory:': a ledger in memory declares no concurrent connections
  const probeDir = scratchDir();
  const probe = knexOnSqlite(join(probeDir.dir, 'probe.db'));
  afterAll(async () => {
    await probe.destroy();
    probeDir.remove();
  });

  describeLedgerConformance<Knex.Transaction>('knex (better-sqlite3)', {
    capabilities: knexLedger(probe).capabilities,
    construct: (table) => knexLedger(probe, { table }),
    async create() {
      const scratch = scratchDir();
      const path = join(scratch.dir, 'ledger.db');
      const admin = knexOnSqlite(path);
      await admin.schema.createTable('effects', (t) => t.text('key').notNullable());
      const instances: Knex[] = [];
      return {
        async open(options = {}) {
          // a knex instance of its own (its pool of one connection), as another process would open it
          const knex = knexOnSqlite(path);
          instances.push(knex);
          const ledger = knexLedger(knex, options);
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (trx, key) => {
            await trx.insert({ key }).into('effects');
          },
          count: async (key) => {
            const rows: { n: unknown }[] = await admin.from('effects').where({ key }).count({ n: '*' });
            return Number(rows[0]?.n ?? 0);
          },
        },
        async teardown() {
          await Promise.all(instances.map((knex) => knex.destroy()));
          await admin.destroy();
          scratch.remove();
        },
      };
    },
  });
});
