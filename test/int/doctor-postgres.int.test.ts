import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PostgresLedger } from 'oncemq/postgres';
import { doctor } from '../support/doctor.js';
import { dropSchema, findPostgres, newPool, scratchSchema } from '../support/postgres.js';

const service = await findPostgres();

describe.skipIf(!service.available)('oncemq doctor on PostgreSQL', () => {
  const admin = newPool(service.url, 1);
  let schema = '';
  const args = (...extra: string[]): string[] => [
    '--store',
    'postgres',
    '--url',
    service.url,
    '--schema',
    schema,
    ...extra,
  ];
  const table = (): string => `"${schema}".oncemq_ledger`;

  beforeEach(async () => {
    schema = scratchSchema('oncemq_doctor');
    const ledger = new PostgresLedger({ connectionString: service.url, schema, poolSize: 1 });
    await ledger.migrate();
    await ledger.close();
  });
  afterEach(async () => {
    await dropSchema(admin, schema);
  });
  afterAll(async () => {
    await admin.end();
  });

  it('finds a table made by oncemq migrate as expected, and nothing failed', async () => {
    const run = await doctor(args('--lease', '30s'));
    expect(run.of('ledger.schema').status).toBe('ok');
    expect(run.of('ledger.retention').status).toBe('ok');
    expect(run.of('ledger.clock').status).toBe('ok');
    expect(run.of('ledger.size').status).toBe('ok');
    expect(run.of('ledger.stuck').status).toBe('ok');
    expect(run.failed).toEqual([]);
  });

  it('fails the schema without a unique key on (consumer_group, msg_key), in any column order', async () => {
    await admin.query(`ALTER TABLE ${table()} DROP CONSTRAINT oncemq_ledger_pkey`);
    const finding = (await doctor(args())).of('ledger.schema');
    expect(finding.status).toBe('fail');
    expect(finding.summary).toMatch(/no unique key on \(consumer_group, msg_key\)/);
    await admin.query(`CREATE INDEX plain_key ON ${table()} (consumer_group, msg_key)`);
    const plain = (await doctor(args())).of('ledger.schema');
    expect(plain.status).toBe('fail');
    expect(plain.summary).toMatch(/no unique key on \(consumer_group, msg_key\)/);
    await admin.query(`CREATE UNIQUE INDEX unique_key ON ${table()} (msg_key, consumer_group)`);
    expect((await doctor(args())).of('ledger.schema').status).toBe('ok');
  });

  it('warns, without failing, when a secondary index is dropped', async () => {
    await admin.query(`DROP INDEX "${schema}".oncemq_ledger_status_updated`);
    const finding = (await doctor(args())).of('ledger.schema');
    expect(finding.status).toBe('warn');
    expect(finding.summary).toMatch(/no index on \(status, updated_at\)/);
  });

  it('fails the schema when a column has another type', async () => {
    await admin.query(`ALTER TABLE ${table()} ALTER COLUMN lease_until TYPE text`);
    const finding = (await doctor(args())).of('ledger.schema');
    expect(finding.status).toBe('fail');
    expect(finding.summary).toMatch(/column lease_until is text, expected timestamp with time zone/);
  });

  it('fails the retention when it is shorter than the retry horizon plus the replay margin', async () => {
    const run = await doctor(args('--retention', '1d4h'));
    expect(run.of('ledger.retention').status).toBe('fail');
    expect(run.of('ledger.retention').summary).toMatch(/1d4h vs redelivery horizon 1d4h45m40s/);
    const enough = await doctor(args('--retention', '1d4h45m40s'));
    expect(enough.of('ledger.retention').status).toBe('ok');
    const shorterRetries = await doctor(args('--retention', '1d4h', '--retry', 'exponential:1s:1h:3'));
    expect(shorterRetries.of('ledger.retention').status).toBe('ok');
  });

  it('fails the clock when this host is half a lease off the database, and warns at a tenth', async () => {
    const shifted = (ms: number) => () => Date.now() + ms;
    expect((await doctor(args('--lease', '30s'), shifted(60_000))).of('ledger.clock').status).toBe('fail');
    expect((await doctor(args('--lease', '30s'), shifted(-60_000))).of('ledger.clock').status).toBe('fail');
    expect((await doctor(args('--lease', '5m'), shifted(60_000))).of('ledger.clock').status).toBe('warn');
    expect((await doctor(args(), shifted(60_000))).of('ledger.clock').status).toBe('warn');
  });

  it('names a missing table and oncemq migrate, exits 1, and creates nothing', async () => {
    const missing = scratchSchema('oncemq_doctor_missing');
    const run = await doctor(['--store', 'postgres', '--url', service.url, '--schema', missing]);
    expect(run.of('ledger.schema').status).toBe('fail');
    expect(run.of('ledger.schema').fix).toMatch(`oncemq migrate --store postgres --schema ${missing}`);
    expect(run.of('ledger.size').status).toBe('skip');
    const other = await doctor(args('--table', 'absent_ledger'));
    expect(other.of('ledger.schema').summary).toMatch(/the ledger table .*absent_ledger does not exist/);
    const { rows } = await admin.query<{ schema: string | null; table: string | null }>(
      `SELECT (SELECT nspname FROM pg_namespace WHERE nspname = $1) AS schema, to_regclass($2)::text AS table`,
      [missing, `"${schema}".absent_ledger`],
    );
    expect(rows[0]).toEqual({ schema: null, table: null });
  });

  it('counts PROCESSING rows whose lease ended, in the group asked about', async () => {
    const now = Date.now();
    const insert = `INSERT INTO ${table()} (consumer_group, msg_key, status, owner, lease_until, created_at, updated_at)
      VALUES ($1, $2, $3, 'o', $4, $5, $5)`;
    await admin.query(insert, ['g1', 'k1', 'PROCESSING', new Date(now - 60_000), new Date(now)]);
    await admin.query(insert, ['g1', 'k2', 'PROCESSING', new Date(now - 1_000), new Date(now)]);
    await admin.query(insert, ['g2', 'k3', 'PROCESSING', new Date(now - 1_000), new Date(now)]);
    await admin.query(insert, ['g1', 'k4', 'PROCESSING', new Date(now + 600_000), new Date(now)]);
    await admin.query(insert, ['g1', 'k5', 'SUCCESS', null, new Date(now - 2 * 86_400_000)]);
    const run = await doctor(args());
    expect(run.of('ledger.stuck')).toMatchObject({ status: 'warn', detail: { stuck: 3 } });
    expect((await doctor(args('--group', 'g1'))).of('ledger.stuck').detail).toEqual({ stuck: 2 });
    expect(run.of('ledger.size').detail).toMatchObject({ rows: 5, rowsLastDay: 4, rowsLastHour: 4 });
  });

  it('warns when idle_in_transaction_session_timeout is unset, and not when the URL sets it', async () => {
    const without = await doctor(args());
    expect(without.of('postgres.idle-timeout').status).toBe('warn');
    const url = new URL(service.url);
    url.searchParams.set('options', '-c idle_in_transaction_session_timeout=10000');
    const withTimeout = await doctor(['--store', 'postgres', '--url', url.toString(), '--schema', schema]);
    expect(withTimeout.of('postgres.idle-timeout')).toMatchObject({
      status: 'ok',
      detail: { idle_in_transaction_session_timeout: '10s' },
    });
  });

  it('checks the daily-partitioned ledger against its own DDL, and fails it without its primary key', async () => {
    const partitioned = scratchSchema('oncemq_doctor_daily');
    const ledger = new PostgresLedger({
      connectionString: service.url,
      schema: partitioned,
      partitioned: 'daily',
    });
    await ledger.migrate();
    await ledger.close();
    try {
      const base = ['--store', 'postgres', '--url', service.url, '--schema', partitioned];
      const run = await doctor(base);
      expect(run.of('ledger.schema')).toMatchObject({ status: 'ok' });
      expect(run.of('ledger.schema').summary).toMatch(/partitioned daily/);
      await admin.query(`ALTER TABLE "${partitioned}".oncemq_ledger DROP CONSTRAINT oncemq_ledger_pkey`);
      const broken = (await doctor(base)).of('ledger.schema');
      expect(broken.status).toBe('fail');
      expect(broken.summary).toMatch(/no unique key on \(consumer_group, msg_key, created_at\)/);
    } finally {
      await dropSchema(admin, partitioned);
    }
  });
});
