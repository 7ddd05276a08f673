import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MysqlLedger } from 'oncemq/mysql';
import { doctor } from '../support/doctor.js';
import { dropLedgerTables, mysqlService, testPool, uniqueTable } from '../support/mysql.js';

const service = await mysqlService();

describe.skipIf(!service.available)('oncemq doctor on MySQL/MariaDB', () => {
  const pool = testPool(service.url, { size: 2 });
  let table = '';
  const args = (...extra: string[]): string[] => [
    '--store',
    'mysql',
    '--url',
    service.url,
    '--table',
    table,
    ...extra,
  ];

  beforeEach(async () => {
    table = uniqueTable('doctor');
    const ledger = new MysqlLedger({ pool, table });
    await ledger.init();
    await ledger.close();
  });
  afterEach(async () => {
    await dropLedgerTables(pool, table);
  });
  afterAll(async () => {
    await pool.end();
  });

  it('finds a table made by the ledger as expected, and nothing failed', async () => {
    const run = await doctor(args('--lease', '30s'));
    for (const check of [
      'ledger.schema',
      'ledger.retention',
      'ledger.clock',
      'ledger.size',
      'ledger.stuck',
    ]) {
      expect(run.of(check).status, check).toBe('ok');
    }
    expect(run.failed).toEqual([]);
  });

  it('fails the schema when the primary key is dropped', async () => {
    await pool.query(`ALTER TABLE \`${table}\` DROP PRIMARY KEY`);
    const finding = (await doctor(args())).of('ledger.schema');
    expect(finding.status).toBe('fail');
    expect(finding.summary).toMatch(/no unique key on \(consumer_group, msg_key\)/);
  });

  it('warns when the (status, lease_until) index is dropped', async () => {
    await pool.query(`ALTER TABLE \`${table}\` DROP INDEX status_lease`);
    const finding = (await doctor(args())).of('ledger.schema');
    expect(finding.status).toBe('warn');
    expect(finding.summary).toMatch(/no index on \(status, lease_until\)/);
  });

  it('fails the schema when a column has another type, and warns when only its width differs', async () => {
    await pool.query(`ALTER TABLE \`${table}\` MODIFY topic VARCHAR(2048) NULL`);
    expect((await doctor(args())).of('ledger.schema').status).toBe('warn');
    await pool.query(`ALTER TABLE \`${table}\` MODIFY lease_until DATETIME NULL`);
    const finding = (await doctor(args())).of('ledger.schema');
    expect(finding.status).toBe('fail');
    expect(finding.summary).toMatch(/column lease_until is datetime, expected bigint/);
  });

  it('fails the retention shorter than the horizon of the given retry policy', async () => {
    const run = await doctor(
      args('--retention', '2h', '--replay-margin', '0s', '--retry', 'delays:1h,1h,1h'),
    );
    expect(run.of('ledger.retention').status).toBe('fail');
    expect(run.of('ledger.retention').detail).toMatchObject({ redeliveryHorizonMs: 3 * 3_600_000 });
  });

  it('fails the clock when this host is a lease off the database', async () => {
    const run = await doctor(args('--lease', '10s'), () => Date.now() - 20_000);
    expect(run.of('ledger.clock').status).toBe('fail');
    expect(run.of('ledger.clock').summary).toMatch(/behind mysql's/);
  });

  it('names a missing table and database and the migrate command, and creates neither', async () => {
    const absent = uniqueTable('absent');
    const run = await doctor(['--store', 'mysql', '--url', service.url, '--table', absent]);
    expect(run.of('ledger.schema')).toMatchObject({ status: 'fail' });
    expect(run.of('ledger.schema').fix).toMatch(
      `oncemq migrate --store mysql --database test --table ${absent}`,
    );
    const noDb = await doctor(['--store', 'mysql', '--url', service.url, '--database', `${absent}_db`]);
    expect(noDb.of('ledger.schema').summary).toMatch(`the database ${absent}_db does not exist`);
    const [rows] = await pool.query(
      `SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME LIKE ?) AS tables,
         (SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?) AS dbs`,
      [`${absent}%`, `${absent}_db`],
    );
    expect(rows).toEqual([{ tables: 0, dbs: 0 }]);
  });

  it('counts PROCESSING rows whose lease ended', async () => {
    const now = Date.now();
    const insert = `INSERT INTO \`${table}\` (consumer_group, msg_key, status, owner, lease_until, created_at, updated_at)
      VALUES (?, ?, 'PROCESSING', 'o', ?, ?, ?)`;
    await pool.execute(insert, ['g', 'k1', now - 60_000, now, now]);
    await pool.execute(insert, ['g', 'k2', now + 600_000, now, now]);
    const run = await doctor(args());
    expect(run.of('ledger.stuck')).toMatchObject({ status: 'warn', detail: { stuck: 1 } });
    expect(run.of('ledger.size').detail).toMatchObject({ rows: 2, rowsLastDay: 2 });
  });

  it('reads the idle-transaction timeout of its session', async () => {
    const [rows] = await pool.query('SELECT VERSION() AS version, @@idle_transaction_timeout AS idle');
    const server = (rows as { version: string; idle: number }[])[0];
    const finding = (await doctor(args())).of('mysql.idle-timeout');
    if (!/mariadb/i.test(server?.version ?? '')) expect(finding.status).toBe('skip');
    else expect(finding.status).toBe(Number(server?.idle) > 0 ? 'ok' : 'warn');
  });
});
