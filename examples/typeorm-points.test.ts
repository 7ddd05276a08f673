import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { mysqlService } from '../test/support/mysql.js';
import { scratchDir } from '../test/support/points.js';
import { findPostgres, scratchSchema } from '../test/support/postgres.js';
import { PointsEntity, run } from './typeorm-points.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

const THREE_COPIES = {
  actions: ['executed', 'duplicate (redelivery)', 'duplicate (republish)'],
  balance: 100,
};

describe('the TypeORM payment-to-points example', () => {
  it.skipIf(!postgres.available)('applies one event delivered three times once on PostgreSQL', async () => {
    const schema = scratchSchema('oncemq_ex');
    const dataSource = await new DataSource({
      type: 'postgres',
      url: postgres.url,
      schema,
      entities: [PointsEntity],
    }).initialize();
    try {
      await dataSource.query(`CREATE SCHEMA "${schema}"`);
      await dataSource.synchronize();
      expect(await run(dataSource)).toEqual(THREE_COPIES);
      expect(await dataSource.query(`SELECT count(*)::int AS n FROM "${schema}".oncemq_ledger`)).toEqual([
        { n: 1 },
      ]);
    } finally {
      await dataSource.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await dataSource.destroy();
    }
  });

  it.skipIf(!mysql.available)('applies one event delivered three times once on MariaDB', async () => {
    const database = `oncemq_ex_${process.pid}_${randomBytes(4).toString('hex')}`;
    const url = new URL(mysql.url);
    const admin = await new DataSource({ type: 'mysql', url: mysql.url }).initialize();
    await admin.query(`CREATE DATABASE \`${database}\``);
    url.pathname = `/${database}`;
    const dataSource = new DataSource({ type: 'mysql', url: url.href, entities: [PointsEntity] });
    try {
      await dataSource.initialize();
      await dataSource.synchronize();
      expect(await run(dataSource)).toEqual(THREE_COPIES);
    } finally {
      if (dataSource.isInitialized) await dataSource.destroy();
      await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
      await admin.destroy();
    }
  });

  it('applies one event delivered three times once on SQLite (better-sqlite3), with the consumer unchanged', async () => {
    const scratch = scratchDir();
    const dataSource = await new DataSource({
      type: 'better-sqlite3',
      database: join(scratch.dir, 'points.db'),
      entities: [PointsEntity],
      synchronize: true,
    }).initialize();
    try {
      expect(await run(dataSource)).toEqual(THREE_COPIES);
      expect(await dataSource.query('SELECT count(*) AS n FROM oncemq_ledger')).toEqual([{ n: 1 }]);
    } finally {
      await dataSource.destroy();
      scratch.remove();
    }
  });

  it('is quoted in docs/orm/typeorm.md exactly as it compiles', () => {
    const source = readFileSync(new URL('./typeorm-points.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/orm/typeorm.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
