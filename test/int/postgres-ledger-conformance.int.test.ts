import { describe } from 'vitest';
import type pg from 'pg';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { describeLedgerConformance } from 'oncemq/conformance';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';

const service = await findPostgres();

for (const partitioned of [false, 'daily'] as const) {
  describe.skipIf(!service.available)(`postgres${partitioned ? ' (partitioned daily)' : ''}`, () => {
    describeLedgerConformance<PgClientLike>(partitioned ? 'postgres partitioned' : 'postgres', {
      capabilities: new PostgresLedger({ connectionString: service.url, partitioned }).capabilities,
      construct: (table) => new PostgresLedger({ connectionString: service.url, table, partitioned }),
      async create() {
        const schema = scratchSchema();
        const admin = newPool(service.url, 1);
        await admin.query(`CREATE SCHEMA "${schema}"`);
        await admin.query(`CREATE TABLE "${schema}".effects (key text NOT NULL)`);
        const pools: pg.Pool[] = [admin];
        return {
          async open(options = {}) {
            const pool = newPool(service.url);
            pools.push(pool);
            const ledger = new PostgresLedger({ pool, schema, partitioned, ...options });
            await ledger.init();
            return ledger;
          },
          effect: {
            apply: async (tx, key) => {
              await tx.query(`INSERT INTO "${schema}".effects (key) VALUES ($1)`, [key]);
            },
            count: async (key) => {
              const { rows } = await admin.query<{ n: number }>(
                `SELECT COUNT(*)::int AS n FROM "${schema}".effects WHERE key = $1`,
                [key],
              );
              return rows[0]?.n ?? 0;
            },
          },
          async teardown() {
            await dropSchema(admin, schema);
            await Promise.all(pools.map((pool) => pool.end()));
          },
        };
      },
    });
  });
}
