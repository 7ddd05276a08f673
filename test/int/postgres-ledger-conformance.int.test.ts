import { describe } from 'vitest';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { describeLedgerConformance } from 'oncemq/conformance';
import { findPostgres, postgresNamespace } from '../support/postgres.js';

const service = await findPostgres();

for (const partitioned of [false, 'daily'] as const) {
  describe.skipIf(!service.available)(`postgres${partitioned ? ' (partitioned daily)' : ''}`, () => {
    describeLedgerConformance<PgClientLike>(partitioned ? 'postgres partitioned' : 'postgres', {
      capabilities: new PostgresLedger({ connectionString: service.url, partitioned }).capabilities,
      construct: (table) => new PostgresLedger({ connectionString: service.url, table, partitioned }),
      create: () =>
        postgresNamespace(
          service.url,
          (pool, schema, options) => new PostgresLedger({ pool, schema, partitioned, ...options }),
        ),
    });
  });
}
