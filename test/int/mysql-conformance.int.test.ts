import type { PoolConnection } from 'mysql2/promise';
import { afterAll, describe } from 'vitest';
import { MysqlLedger } from 'oncemq/mysql';
import { describeLedgerConformance } from 'oncemq/conformance';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';

const service = await mysqlService();
const admin = testPool(service.url, { size: 2 });

afterAll(async () => {
  await admin.end();
});

describe.skipIf(!service.available)('MySQL/MariaDB ledger', () => {
  describeLedgerConformance<PoolConnection>('mysql', {
    capabilities: new MysqlLedger({ pool: admin }).capabilities,
    construct: (table) => new MysqlLedger({ pool: admin, table }),
    async create() {
      const table = uniqueTable('conf');
      const effects = `${table}_effects`;
      await admin.query(`CREATE TABLE \`${effects}\` (msg_key VARBINARY(255) NOT NULL) ENGINE = InnoDB`);
      const pools: ReturnType<typeof testPool>[] = [];
      return {
        async open(options = {}) {
          // each instance has its own pool, so claims through different instances race on separate connections
          const pool = testPool(service.url, { size: 4 });
          pools.push(pool);
          const ledger = new MysqlLedger<PoolConnection>({ pool, table, ...options });
          await ledger.init();
          return ledger;
        },
        effect: {
          apply: async (tx, key) => {
            await tx.execute(`INSERT INTO \`${effects}\` (msg_key) VALUES (?)`, [key]);
          },
          count: async (key) => {
            const [found] = await admin.execute(
              `SELECT COUNT(*) AS n FROM \`${effects}\` WHERE msg_key = ?`,
              [key],
            );
            return Number((found as { n: unknown }[])[0]?.n ?? 0);
          },
        },
        async teardown() {
          await Promise.all(pools.map((pool) => pool.end()));
          await dropLedgerTables(admin, table);
          await admin.query(`DROP TABLE IF EXISTS \`${effects}\``);
        },
      };
    },
  });
});
