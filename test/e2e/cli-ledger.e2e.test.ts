import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimRequest, Ledger } from 'oncemq';
import { MysqlLedger } from 'oncemq/mysql';
import { SqliteLedger } from 'oncemq/sqlite';
import { buildCli, oncemq, removeCli } from '../support/cli-run.js';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';
import { scratchDir } from '../support/points.js';

const mariadb = await mysqlService();

beforeAll(buildCli, 120_000);
afterAll(removeCli);

const request = (key: string, extra: Partial<ClaimRequest> = {}): ClaimRequest => ({
  group: 'points',
  key,
  fingerprint: null,
  brokerId: 'b1',
  topic: 'payments',
  leaseMs: 30_000,
  ...extra,
});

/** One stuck claim (lease ended long ago), one failed, one applied. */
async function seed(ledger: Ledger): Promise<void> {
  await ledger.init();
  await ledger.claim(request('evt-stuck', { leaseMs: 1 }));
  await ledger.claim(request('evt-running', { leaseMs: 3_600_000 }));
  await ledger.recordFailure(request('evt-failed'), 'Error: points service timed out');
  await ledger.transaction(request('evt-done'), () => null);
}

/** The same inspection session against any store; `store` are the flags that select it. */
function inspectionCases(store: () => string[], open: () => Promise<Ledger>): void {
  it('migrate creates the table and is idempotent', async () => {
    const first = await oncemq(['migrate', ...store()]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('migrated');
    expect((await oncemq(['migrate', ...store(), '--json'])).stdout).toContain('"ok":true');
  });

  it('lists stuck and failed claims, shows a key, and resets on purpose', async () => {
    const ledger = await open();
    await seed(ledger);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const stuck = await oncemq(['ledger', 'stuck', ...store(), '--json']);
    expect(stuck.code, stuck.stderr).toBe(0);
    expect((JSON.parse(stuck.stdout) as { key: string }[]).map((r) => r.key)).toEqual(['evt-stuck']);
    const failed = await oncemq(['ledger', 'failed', ...store(), '--group', 'points']);
    expect(failed.stdout).toContain('evt-failed');
    expect(failed.stdout).toContain('points service timed out');
    const shown = await oncemq(['ledger', 'show', 'evt-done', '--group', 'points', ...store(), '--json']);
    expect(JSON.parse(shown.stdout)).toMatchObject({ key: 'evt-done', status: 'SUCCESS', attempt: 1 });

    const refused = await oncemq(['ledger', 'reset', 'evt-done', '--group', 'points', ...store()]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('--force');
    expect((await oncemq(['ledger', 'reset', 'evt-stuck', '--group', 'points', ...store()])).code).toBe(0);
    expect(
      (await oncemq(['ledger', 'reset', 'evt-done', '--group', 'points', '--force', ...store()])).code,
    ).toBe(0);
    expect(await ledger.get('points', 'evt-done')).toBeUndefined();
    expect(await ledger.get('points', 'evt-running')).toMatchObject({ status: 'PROCESSING' });
    const after = await oncemq(['ledger', 'stuck', ...store()]);
    expect(after.stdout).toContain('no stuck claims');
    expect((await oncemq(['ledger', 'show', 'evt-stuck', '--group', 'points', ...store()])).code).toBe(1);
  });

  it('answers wrong input with usage and exit code 2, never touching rows', async () => {
    expect((await oncemq(['ledger', 'show', 'evt-failed', ...store()])).code).toBe(2);
    expect((await oncemq(['ledger', 'purge-all', ...store()])).code).toBe(2);
    expect((await oncemq(['ledger', 'failed', ...store(), '--limit', '0'])).code).toBe(2);
    const hostile = await oncemq(['ledger', 'failed', ...store(), '--table', 'x; DROP TABLE y']);
    expect(hostile.code).toBe(1);
    expect(hostile.stderr).toContain('ConfigError');
  });
}

describe('oncemq migrate and ledger on SQLite', () => {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'ledger.db');
  const ledgers: SqliteLedger[] = [];
  afterAll(async () => {
    await Promise.all(ledgers.map((l) => l.close()));
    scratch.remove();
  });
  inspectionCases(
    () => ['--store', 'sqlite', '--url', path],
    () => {
      const ledger = new SqliteLedger({ database: path });
      ledgers.push(ledger);
      return Promise.resolve(ledger);
    },
  );
});

describe.skipIf(!mariadb.available)('oncemq migrate and ledger on MariaDB', () => {
  const table = uniqueTable('cli');
  const pool = testPool(mariadb.url, { size: 2 });
  afterAll(async () => {
    await dropLedgerTables(pool, table);
    await pool.end();
  });
  // no --url: the URL comes from ONCEMQ_MYSQL_URL or the loopback default
  inspectionCases(
    () => ['--store', 'mysql', '--table', table],
    () => Promise.resolve(new MysqlLedger({ pool, table })),
  );
});
