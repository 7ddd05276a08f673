import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../test/support/postgres.js';
import { deleteTopology, findRabbit, scratchPrefix } from '../test/support/rabbitmq.js';
import { run } from './rabbitmq-payment-to-points.js';

const rabbit = await findRabbit();
const postgres = await findPostgres();

describe('the RabbitMQ payment-to-points example', () => {
  it.skipIf(!rabbit.available || !postgres.available)(
    'adds 100 points once for one payment published three times',
    async () => {
      const admin = newPool(postgres.url, 1);
      const schema = scratchSchema();
      await admin.query(`CREATE SCHEMA "${schema}"`);
      const prefix = scratchPrefix();
      try {
        const { balance, transport } = await run({
          databaseUrl: postgres.url,
          rabbitUrl: rabbit.url,
          schema,
          prefix,
        });
        expect(balance).toBe(100);
        await deleteTopology(rabbit.url, transport.declared);
      } finally {
        await dropSchema(admin, schema);
        await admin.end();
      }
    },
  );

  it('is quoted in the RabbitMQ transport page exactly as it compiles', () => {
    const source = readFileSync(new URL('./rabbitmq-payment-to-points.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/transports/rabbitmq.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
