import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MikroORM as SqliteOrm } from '@mikro-orm/better-sqlite';
import { MikroORM as MysqlOrm } from '@mikro-orm/mysql';
import { MikroORM as PostgresOrm } from '@mikro-orm/postgresql';
import { describe, expect, it } from 'vitest';
import { mysqlService } from '../test/support/mysql.js';
import { scratchDir } from '../test/support/points.js';
import { findPostgres, scratchSchema } from '../test/support/postgres.js';
import { PointsEntity, run } from './mikro-orm-points.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

const THREE_COPIES = {
  actions: ['executed', 'duplicate (redelivery)', 'duplicate (republish)'],
  balance: 100,
};

describe('the MikroORM payment-to-points example', () => {
  it.skipIf(!postgres.available)('applies one event delivered three times once on PostgreSQL', async () => {
    const schema = scratchSchema('oncemq_ex');
    const orm = await PostgresOrm.init({ clientUrl: postgres.url, schema, entities: [PointsEntity] });
    try {
      await orm.em.getConnection().execute(`CREATE SCHEMA "${schema}"`);
      await orm.schema.createSchema();
      expect(await run(orm)).toEqual(THREE_COPIES);
      expect(
        await orm.em.getConnection().execute(`SELECT count(*)::int AS n FROM "${schema}".oncemq_ledger`),
      ).toEqual([{ n: 1 }]);
    } finally {
      await orm.em.getConnection().execute(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await orm.close();
    }
  });

  it.skipIf(!mysql.available)('applies one event delivered three times once on MariaDB', async () => {
    const dbName = `oncemq_ex_${process.pid}_${randomBytes(4).toString('hex')}`;
    const orm = await MysqlOrm.init({ clientUrl: mysql.url, dbName, entities: [PointsEntity] });
    try {
      await orm.schema.ensureDatabase();
      await orm.schema.createSchema();
      expect(await run(orm)).toEqual(THREE_COPIES);
    } finally {
      await orm.schema.dropDatabase(dbName);
      await orm.close();
    }
  });

  it('applies one event delivered three times once on SQLite (@mikro-orm/better-sqlite), with the consumer unchanged', async () => {
    const scratch = scratchDir();
    const orm = await SqliteOrm.init({ dbName: join(scratch.dir, 'points.db'), entities: [PointsEntity] });
    try {
      await orm.schema.createSchema();
      expect(await run(orm)).toEqual(THREE_COPIES);
      expect(await orm.em.getConnection().execute('SELECT count(*) AS n FROM oncemq_ledger')).toEqual([
        { n: 1 },
      ]);
    } finally {
      await orm.close();
      scratch.remove();
    }
  });

  it('is quoted in docs/orm/mikro-orm.md exactly as it compiles', () => {
    const source = readFileSync(new URL('./mikro-orm-points.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/orm/mikro-orm.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
