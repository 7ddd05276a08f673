import { describe, expect, it } from 'vitest';
import {
  clockFinding,
  mysqlMigrations,
  parseLedgerDdl,
  parseRetryOption,
  pgMigrations,
  sizeFinding,
  sqliteMigrations,
} from '../support/internal.js';

describe('doctor: the ledger table expected from the ledgers’ own DDL', () => {
  const KEYS = [
    { columns: ['consumer_group', 'msg_key'], unique: true },
    { columns: ['status', 'updated_at'], unique: false },
  ];

  it.each([
    ['postgres', pgMigrations('s', 't')[0] ?? '', ['lease_until']],
    ['sqlite', sqliteMigrations('t')[0] ?? '', ['status', 'lease_until']],
    ['mysql', mysqlMigrations('`d`.`t`')[0]?.[0] ?? '', ['status', 'lease_until']],
  ])('reads the 13 columns and 3 keys of the %s ledger', (_, ddl, stuckIndex) => {
    const shape = parseLedgerDdl(ddl);
    expect(shape.columns.map((column) => column.name)).toEqual([
      'consumer_group',
      'msg_key',
      'status',
      'fingerprint',
      'owner',
      'attempt',
      'lease_until',
      'broker_id',
      'topic',
      'remark',
      'result',
      'created_at',
      'updated_at',
    ]);
    expect(shape.indexes).toEqual([...KEYS, { columns: stuckIndex, unique: false }]);
    expect(shape.columns.find((column) => column.name === 'created_at')?.notNull).toBe(true);
    expect(shape.columns.find((column) => column.name === 'lease_until')?.notNull).toBe(false);
  });

  it('reads the types as written, without what follows them', () => {
    const mysql = parseLedgerDdl(mysqlMigrations('t')[0]?.[0] ?? '').columns;
    expect(mysql.find((column) => column.name === 'status')?.type).toBe('VARCHAR(10)');
    expect(mysql.find((column) => column.name === 'attempt')?.type).toBe('INT UNSIGNED');
    const pg = parseLedgerDdl(pgMigrations('s', 't')[0] ?? '').columns;
    expect(pg.find((column) => column.name === 'lease_until')?.type).toBe('timestamptz');
  });

  it('keeps created_at in the unique key of the daily-partitioned ledger', () => {
    expect(parseLedgerDdl(pgMigrations('s', 't', true)[0] ?? '').indexes[0]).toEqual({
      columns: ['consumer_group', 'msg_key', 'created_at'],
      unique: true,
    });
  });
});

describe('doctor: --retry', () => {
  it.each([
    [undefined, 'rocketmq', 17_140_000],
    ['rocketmq:3', 'rocketmq', 10_000 + 30_000 + 60_000],
    ['none', 'none', 0],
    ['exponential:1s:4s:4', 'exponential', 1_000 + 2_000 + 4_000 + 4_000],
    ['exponential:1s:1h:3:10', 'exponential', 1_000 + 10_000 + 100_000],
    ['delays:1m,5m', 'delays', 360_000],
  ])('reads %s as the %s policy with its horizon', (spelling, name, horizonMs) => {
    const policy = parseRetryOption(spelling);
    expect(policy.name).toBe(name);
    expect(policy.horizonMs).toBe(horizonMs);
  });

  it.each(['weekly', 'rocketmq:x', 'exponential:1s', 'exponential:soon:1h:3', 'none:2'])(
    'refuses %s',
    (spelling) => {
      expect(() => parseRetryOption(spelling)).toThrow(/--retry/);
    },
  );
});

describe('doctor: thresholds', () => {
  it('counts only the skew beyond half the round trip', () => {
    expect(clockFinding({ skewMs: 15_500, roundTripMs: 2_000 }, 30_000, 'db').status).toBe('warn');
    expect(clockFinding({ skewMs: 16_000, roundTripMs: 2_000 }, 30_000, 'db').status).toBe('fail');
    expect(clockFinding({ skewMs: -2_900, roundTripMs: 0 }, 30_000, 'db').status).toBe('ok');
  });

  it('warns when the disk fills within two weeks at the last day’s growth', () => {
    const disk = { path: '/data', freeBytes: 13 * 1_000_000, totalBytes: 1e9 };
    const size = { rows: 1_000, bytes: 1_000_000, rowsLastDay: 1_000, rowsLastHour: 40, disk };
    expect(sizeFinding(size)).toMatchObject({ status: 'warn', detail: { daysUntilFull: 13 } });
    expect(sizeFinding({ ...size, disk: { ...disk, freeBytes: 15_000_000 } }).status).toBe('ok');
    expect(sizeFinding({ ...size, rowsLastDay: 0 }).status).toBe('ok');
  });
});
