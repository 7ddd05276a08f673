import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mysqlService } from '../test/support/mysql.js';
import { findPostgres } from '../test/support/postgres.js';
import {
  prismaMysqlDatabase,
  prismaPostgresSchema,
  type PostgresPrismaClient,
} from '../test/support/prisma.js';
import { run } from './prisma-points.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

describe('the Prisma payment-to-points example', () => {
  it.skipIf(!postgres.available)(
    'adds 100 points once for one payment delivered three times, on PostgreSQL',
    async () => {
      const namespace = await prismaPostgresSchema(postgres.url);
      try {
        expect(await run(namespace.client(), { schema: namespace.name })).toEqual({
          kinds: ['executed', 'duplicate', 'duplicate'],
          balance: 100,
        });
      } finally {
        await namespace.drop();
      }
    },
  );

  it.skipIf(!mysql.available)('does the same on MariaDB, with the client of the same models', async () => {
    const namespace = await prismaMysqlDatabase(mysql.url);
    try {
      // the MySQL schema generates the same model API; only the client's type names differ
      const prisma = namespace.client() as unknown as PostgresPrismaClient;
      expect(await run(prisma)).toEqual({ kinds: ['executed', 'duplicate', 'duplicate'], balance: 100 });
    } finally {
      await namespace.drop();
    }
  });

  it('is quoted in docs/orm/prisma.md exactly as it compiles', () => {
    const source = readFileSync(new URL('./prisma-points.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/orm/prisma.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
