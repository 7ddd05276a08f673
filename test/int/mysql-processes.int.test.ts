import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPackage, runNode } from '../support/built-package.js';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';

const mariadb = await mysqlService();

/**
 * One claiming process: `ops` operations on `concurrency` pool connections, each a single
 * transactional claim of a random key or a batch claim of `batch` random keys (seeded), over a key
 * set every process shares. Prints the keys it won, its errors by message and the lock conflicts
 * the ledger retried (its debug log lines).
 */
const CLAIMER = `
import mysql from 'mysql2/promise';
import { MysqlLedger } from './mysql.js';

const [url, table, keysJson, ops, batch, concurrency, seedText] = process.argv.slice(2);
const keys = JSON.parse(keysJson);
let seed = Number(seedText);
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = () => keys[Math.floor(random() * keys.length)];
let retried = 0;
const logger = { debug: () => void retried++, info() {}, warn() {}, error() {} };
const pool = mysql.createPool({ uri: url, connectionLimit: Number(concurrency) + 1 });
const ledger = new MysqlLedger({ pool, table, logger });
const request = (key) => ({ group: 'points', key, fingerprint: null, brokerId: 'b-' + process.pid, topic: 'payments', leaseMs: 30000 });
const won = [];
const errors = {};
let started = 0;
async function worker() {
  while (started++ < Number(ops)) {
    try {
      if (random() < 0.5) {
        const key = pick();
        const result = await ledger.transaction(request(key), () => null);
        if (result.status === 'acquired' || result.status === 'reclaimed') won.push(key);
      } else {
        const picked = Array.from({ length: Number(batch) }, pick);
        const results = await ledger.transactionMany(picked.map(request), (_tx, w) => w.map(() => null));
        results.forEach((r, i) => { if (r.status === 'acquired' || r.status === 'reclaimed') won.push(picked[i]); });
      }
    } catch (error) {
      const text = error.name + ': ' + String(error.message).slice(0, 120);
      errors[text] = (errors[text] ?? 0) + 1;
    }
  }
}
await Promise.all(Array.from({ length: Number(concurrency) }, worker));
await ledger.close();
await pool.end();
process.stdout.write(JSON.stringify({ won, errors, retried }));
`;

describe.skipIf(!mariadb.available)('MariaDB claims from several processes at once', () => {
  let build: ReturnType<typeof buildPackage>;
  const admin = testPool(mariadb.url, { size: 1 });
  const table = uniqueTable('procs');

  beforeAll(() => {
    build = buildPackage();
    writeFileSync(join(build.dir, 'claimer.mjs'), CLAIMER);
  }, 120_000);

  afterAll(async () => {
    build.remove();
    await dropLedgerTables(admin, table);
    await admin.end();
  });

  it('single and batch claims of four processes over one key set never run out of deadlock retries, and win every key once', async () => {
    const keys = Array.from({ length: 400 }, (_, i) => `evt-${(i * 7919) % 10_007}`);
    const processes = 4;
    const outputs = await Promise.all(
      Array.from({ length: processes }, (_, p) =>
        runNode(join(build.dir, 'claimer.mjs'), [
          mariadb.url,
          table,
          JSON.stringify(keys),
          '150',
          '40',
          '4',
          String(p + 1),
        ]),
      ),
    );
    const wins = new Map<string, number>();
    for (const output of outputs) {
      expect(output.code, output.stderr).toBe(0);
      const report = JSON.parse(output.stdout) as { won: string[]; errors: Record<string, number> };
      expect(report.errors).toEqual({});
      for (const key of report.won) wins.set(key, (wins.get(key) ?? 0) + 1);
    }
    expect(wins.size).toBe(keys.length);
    expect([...wins.values()].every((n) => n === 1)).toBe(true);
    const [rows] = await admin.query(`SELECT COUNT(*) AS n FROM \`${table}\` WHERE status = 'SUCCESS'`);
    expect(Number((rows as { n: unknown }[])[0]?.n)).toBe(keys.length);
  });
});
