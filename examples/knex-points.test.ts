import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import knexFactory from 'knex';
import { describe, expect, it } from 'vitest';
import { scratchDir } from '../test/support/points.js';
import { findPostgres, scratchSchema } from '../test/support/postgres.js';
import { mysqlService } from '../test/support/mysql.js';
import { run } from './knex-points.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

describe('the Knex payment-to-points example', () => {
  it.skipIf(!postgres.available)(
    'adds 100 points once for one payment delivered three times, on PostgreSQL',
    async () => {
      const schema = scratchSchema('oncemq_knex_example');
      const admin = knexFactory({ client: 'pg', connection: postgres.url });
      await admin.raw(`CREATE SCHEMA "${schema}"`);
      // the example's own knex, whose search path is the scratch schema; the ledger's schema is
      // named too, since a PostgreSQL ledger defaults to public whatever the search path says
      const knex = knexFactory({ client: 'pg', connection: postgres.url, searchPath: [schema] });
      try {
        expect(await run(knex, { schema })).toEqual({
          kinds: ['executed', 'duplicate', 'duplicate'],
          balance: 100,
        });
      } finally {
        await knex.destroy();
        await admin.raw(`DROP SCHEMA "${schema}" CASCADE`);
        await admin.destroy();
      }
    },
  );

  it.skipIf(!mysql.available)('does the same on MariaDB, in a database of its own', async () => {
    const database = `oncemq_knex_${process.pid}`;
    const admin = knexFactory({ client: 'mysql2', connection: mysql.url });
    await admin.raw(`CREATE DATABASE \`${database}\``);
    const url = new URL(mysql.url);
    url.pathname = `/${database}`;
    const knex = knexFactory({ client: 'mysql2', connection: url.toString() });
    try {
      expect(await run(knex)).toEqual({ kinds: ['executed', 'duplicate', 'duplicate'], balance: 100 });
    } finally {
      await knex.destroy();
      await admin.raw(`DROP DATABASE \`${database}\``);
      await admin.destroy();
    }
  });

  it('does the same on SQLite (better-sqlite3), in a file of its own', async () => {
    const scratch = scratchDir();
    const knex = knexFactory({
      client: 'better-sqlite3',
      connection: { filename: join(scratch.dir, 'points.db') },
      useNullAsDefault: true,
    });
    try {
      expect(await run(knex)).toEqual({ kinds: ['executed', 'duplicate', 'duplicate'], balance: 100 });
    } finally {
      await knex.destroy();
      scratch.remove();
    }
  });

  it('is quoted in docs/orm/knex.md exactly as it compiles', () => {
    const source = readFileSync(new URL('./knex-points.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/orm/knex.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
