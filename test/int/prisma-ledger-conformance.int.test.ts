import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { PrismaPg } from '@prisma/adapter-pg';
import { afterAll, describe } from 'vitest';
import { describeLedgerConformance } from 'oncemq/conformance';
import { prismaLedger } from 'oncemq/prisma';
import { mysqlService } from '../support/mysql.js';
import { findPostgres } from '../support/postgres.js';
import {
  MysqlPrismaClient,
  PostgresPrismaClient,
  prismaMysqlDatabase,
  prismaPostgresSchema,
  type MysqlPrismaTx,
  type PostgresPrismaTx,
} from '../support/prisma.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

// Each instance a namespace opens is a PrismaClient of its own (its own pool), so claims through
// different instances race on separate connections; the effect is written with Prisma's model API.

describe.skipIf(!postgres.available)('Prisma on PostgreSQL', () => {
  // never connected: it only builds ledgers that are not initialized
  const unused = new PostgresPrismaClient({ adapter: new PrismaPg({ connectionString: postgres.url }) });
  afterAll(() => unused.$disconnect());

  describeLedgerConformance<PostgresPrismaTx>('prisma (pg)', {
    capabilities: prismaLedger(unused).capabilities,
    construct: (table) => prismaLedger(unused, { table }),
    async create() {
      const namespace = await prismaPostgresSchema(postgres.url);
      const reader = namespace.client({ max: 1 });
      return {
        async open(options = {}) {
          const ledger = prismaLedger(namespace.client(), { schema: namespace.name, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (tx, key) => {
            await tx.effect.create({ data: { key } });
          },
          count: (key) => reader.effect.count({ where: { key } }),
        },
        teardown: () => namespace.drop(),
      };
    },
  });
});

describe.skipIf(!mysql.available)('Prisma on MySQL/MariaDB', () => {
  const unused = new MysqlPrismaClient({ adapter: new PrismaMariaDb(mysql.url) });
  afterAll(() => unused.$disconnect());

  describeLedgerConformance<MysqlPrismaTx>('prisma (mariadb)', {
    capabilities: prismaLedger(unused).capabilities,
    construct: (table) => prismaLedger(unused, { table }),
    async create() {
      const namespace = await prismaMysqlDatabase(mysql.url);
      const reader = namespace.client({ max: 1 });
      return {
        async open(options = {}) {
          const ledger = prismaLedger(namespace.client(), options);
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (tx, key) => {
            await tx.effect.create({ data: { key } });
          },
          count: (key) => reader.effect.count({ where: { key } }),
        },
        teardown: () => namespace.drop(),
      };
    },
  });
});
