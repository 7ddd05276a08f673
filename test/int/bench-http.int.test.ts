import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { suite as http } from '../../bench/http.js';
import { measureHttp } from '../../bench/http-load.js';
import { httpBenchTables, startHttpBenchServer, type HttpBenchServer } from '../../bench/http-server.js';
import { findService } from '../support/services.js';

const postgres = await findService({
  variable: 'ONCEMQ_POSTGRES_URL',
  defaultUrl: 'postgres://postgres@127.0.0.1:5432/test',
});
const redis = await findService({ variable: 'ONCEMQ_REDIS_URL', defaultUrl: 'redis://127.0.0.1:6379' });

/**
 * `npm run bench -- http` run tiny, its server in process: every row produced with a rate, and every
 * slice checked by the suite itself (one order row per key, replays write nothing, every answer 2xx).
 * No timing is asserted.
 */
describe.skipIf(!postgres.available)('bench suite http', () => {
  it('gives raw:http, the by-hand, oncemq and peer rows, new keys and replays, each with its ratio to raw:http', async () => {
    const results = await http.run({
      seconds: 1,
      flags: {
        server: 'in-process',
        connections: '4',
        rounds: '1',
        warmup: '1',
        ...(redis.available ? {} : { peers: 'none' }),
      },
    });
    const peers = redis.available
      ? [
          'peer:express-idempotency:new',
          'peer:express-idempotency:replay',
          'peer:@node-idempotency/core:new',
          'peer:@node-idempotency/core:replay',
        ]
      : [];
    expect(results.map((row) => row.name)).toEqual([
      'raw:http',
      'hand:http:new',
      'hand:http:replay',
      'oncemq:http:new',
      'oncemq:http:replay',
      ...peers,
    ]);
    for (const row of results) {
      expect(row.messagesPerSecond, row.name).toBeGreaterThan(0);
      expect(row.concurrency, row.name).toBe(4);
      expect(row.cpuMicrosPerMessage, row.name).toBeGreaterThan(0);
      if (row.name !== 'raw:http') {
        expect(row.baseline, row.name).toBe('raw:http');
        expect(row.ratio, row.name).toBeGreaterThan(0);
        expect(row.ratios, row.name).toHaveLength(1);
      }
    }
  }, 120_000);

  describe('its checks', () => {
    const schema = `oncemq_bench_http_test_${randomBytes(4).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: postgres.url, max: 2 });
    let server: HttpBenchServer;
    const run = (rows: string[]) =>
      measureHttp({
        url: server.url,
        pool,
        schema,
        connections: 2,
        seconds: 1,
        rounds: 1,
        warmupSeconds: 0,
        peers: [],
        keyPrefix: `k-${schema}`,
        rows,
      });

    beforeAll(async () => {
      await pool.query(`CREATE SCHEMA "${schema}"`);
      for (const ddl of httpBenchTables(schema)) await pool.query(ddl);
      server = await startHttpBenchServer({
        postgresUrl: postgres.url,
        schema,
        connections: 2,
        redisUrl: redis.url,
        peers: [],
        redisPrefix: `k-${schema}`,
      });
    });
    afterAll(async () => {
      await server.close();
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    });

    it('fail a run whose replays write again: a route that forgot its claims is not measured as fast', async () => {
      await run(['hand:http:new']);
      // The by-hand route loses its claims: each replay now runs the write a second time.
      await pool.query(`DELETE FROM "${schema}".hand_claims`);
      await expect(run(['hand:http:replay'])).rejects.toThrow(/replay wrote a row|more than one row/);
    }, 60_000);
  });
});
