import { describe, expect, it } from 'vitest';
import { suite as scale } from '../../bench/scale.js';
import type { ScaleResult } from '../../bench/scale-claims.js';
import { findService } from '../support/services.js';

const postgres = await findService({
  variable: 'ONCEMQ_POSTGRES_URL',
  defaultUrl: 'postgres://postgres@127.0.0.1:5432/test',
});
const mariadb = await findService({
  variable: 'ONCEMQ_MYSQL_URL',
  defaultUrl: 'mysql://root@127.0.0.1:3306/test',
});

/**
 * `npm run bench -- scale` run tiny (two sizes of a few thousand rows) on the backends the machine
 * has: every row produced, the loaded rows counted, each claim row compared with the empty table's,
 * and the purge at size deleting the expired fifth with no deadlock. No timing
 * is asserted.
 */
describe.skipIf(!postgres.available)('bench suite scale', () => {
  it('fills, claims against the empty table, and purges at size on every backend', async () => {
    const backends = ['postgres', 'postgres-daily', ...(mariadb.available ? ['mysql'] : [])];
    const results = (await scale.run({
      seconds: 1,
      flags: {
        backends: backends.join(','),
        sizes: '2000,5000',
        rounds: '1',
        concurrency: '2',
        batch: '10',
        batchConcurrency: '1',
        purgeBatch: '100',
        database: 'oncemq_scale_test',
      },
    })) as ScaleResult[];
    for (const backend of backends) {
      const names = results.filter((r) => r.name.startsWith(`${backend}:`)).map((r) => r.name);
      expect(names).toEqual([
        `${backend}:2000:fill`,
        `${backend}:0:single`,
        `${backend}:0:batch`,
        `${backend}:2000:single`,
        `${backend}:2000:batch`,
        `${backend}:2000:replay`,
        `${backend}:5000:fill`,
        `${backend}:0:single`,
        `${backend}:0:batch`,
        `${backend}:5000:single`,
        `${backend}:5000:batch`,
        `${backend}:5000:replay`,
        `${backend}:5000:purge:baseline`,
        `${backend}:5000:purge:claims`,
        `${backend}:5000:purge`,
      ]);
      const fill = results.find((r) => r.name === `${backend}:5000:fill`);
      expect(fill?.tableRows).toBeGreaterThanOrEqual(5000);
      const claims = results.find((r) => r.name === `${backend}:5000:single`);
      expect(claims?.baseline).toBe(`${backend}:0:single`);
      expect(claims?.p99Ratio).toBeGreaterThan(0);
      const purge = results.find((r) => r.name === `${backend}:5000:purge`);
      // A fifth of the rows is expired; its stuck claims (one in 10,000) stay.
      expect(purge?.deleted).toBeGreaterThanOrEqual(950);
      expect(purge?.deleted).toBeLessThanOrEqual(1050);
      // rivalSkipped is not asserted: a tiny pass can end before the rival starts, which then runs its own.
      expect(purge).toMatchObject({ deadlocks: 0 });
    }
  }, 300_000);
});
