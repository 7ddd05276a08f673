import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../test/support/postgres.js';
import { ordersApp } from './http-orders.js';

const postgres = await findPostgres();

describe('the HTTP orders example', () => {
  it.skipIf(!postgres.available)(
    'creates one order for a key sent three times, answers every retry with the first response, and refuses the key for another order',
    async () => {
      const pool = newPool(postgres.url, 4);
      const schema = scratchSchema('oncemq_http_example');
      await pool.query(`CREATE SCHEMA "${schema}"`);
      await pool.query(`CREATE TABLE "${schema}".orders (id serial PRIMARY KEY, item text NOT NULL)`);
      const server = createServer(ordersApp(pool, schema));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`;
      const send = async (item: string) => {
        const response = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'idempotency-key': '"order-7"',
            'x-api-client': 'shop-a',
          },
          body: JSON.stringify({ item }),
        });
        return {
          status: response.status,
          body: await response.text(),
          replayed: response.headers.get('idempotent-replayed'),
        };
      };
      try {
        const answers = [await send('lamp'), await send('lamp'), await send('lamp')];
        expect(answers.map((a) => [a.status, a.replayed])).toEqual([
          [201, null],
          [201, 'true'],
          [201, 'true'],
        ]);
        expect(new Set(answers.map((a) => a.body)).size).toBe(1);
        expect((await send('desk')).status).toBe(422);
        const { rows } = await pool.query<{ n: number }>(`SELECT COUNT(*)::int AS n FROM "${schema}".orders`);
        expect(rows[0]?.n).toBe(1);
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await dropSchema(pool, schema);
        await pool.end();
      }
    },
  );

  it('is quoted in docs/http.md exactly as it compiles', () => {
    const source = readFileSync(new URL('./http-orders.ts', import.meta.url), 'utf8');
    const region = /\/\/ #region example\n([\s\S]*?)\/\/ #endregion example/.exec(source)?.[1];
    const page = readFileSync(new URL('../docs/http.md', import.meta.url), 'utf8');
    expect(region).toBeDefined();
    expect(page).toContain(region?.trim());
  });
});
