import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scratchDir } from '../test/support/points.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../test/support/postgres.js';
import { run, runOnSqlite } from './kysely-points.js';

const postgres = await findPostgres();

describe('the Kysely payment-to-points example', () => {
  it.skipIf(!postgres.available)(
    'applies one event delivered three times once, telling redelivery from republish',
    async () => {
      const admin = newPool(postgres.url, 1);
      const schema = scratchSchema('oncemq_kysely_ex');
      await admin.query(`CREATE SCHEMA "${schema}"`);
      try {
        expect(await run(postgres.url, schema)).toEqual({
          actions: ['executed', 'duplicate (redelivery)', 'duplicate (republish)'],
          balance: 100,
        });
      } finally {
        await dropSchema(admin, schema);
        await admin.end();
      }
    },
  );

  it('does the same on SQLite, in a file of its own', async () => {
    const scratch = scratchDir();
    try {
      expect(await runOnSqlite(join(scratch.dir, 'points.db'))).toEqual({
        actions: ['executed', 'duplicate (redelivery)', 'duplicate (republish)'],
        balance: 100,
      });
    } finally {
      scratch.remove();
    }
  });

  it('is quoted in the Kysely page exactly as it compiles', () => {
    const source = readFileSync(new URL('./kysely-points.ts', import.meta.url), 'utf8');
    const page = readFileSync(new URL('../docs/orm/kysely.md', import.meta.url), 'utf8');
    for (const name of ['example', 'sqlite']) {
      const region = new RegExp(`// #region ${name}\\n([\\s\\S]*?)// #endregion ${name}`).exec(source)?.[1];
      expect(region).toBeDefined();
      expect(page).toContain(region?.trim());
    }
  });
});
