import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { ConfigError, LedgerUnavailableError, type ClaimRequest } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import {
  dropSchema,
  findPostgres,
  pointsSchema,
  scratchSchema,
  type PointsSchema,
} from '../support/postgres.js';

const service = await findPostgres();

const request = (key: string): ClaimRequest => ({
  group: 'points',
  key,
  fingerprint: 'fp',
  brokerId: `b-${key}`,
  topic: 'payments',
  leaseMs: 30_000,
});

describe.skipIf(!service.available)('PostgresLedger specifics', () => {
  let points: PointsSchema;
  let pool: pg.Pool;
  let schema: string;

  beforeAll(async () => {
    points = await pointsSchema(service.url, 8);
    ({ pool, schema } = points);
  });

  afterAll(async () => {
    await points.close();
  });

  const balance = (userId: string): Promise<number> => points.balance(userId);
  const addPoints = (client: PgClientLike, userId: string, amount: number) =>
    points.addPoints(client, userId, amount);

  it('migrates idempotently: concurrent starters on a fresh schema serialize and record version 1 once', async () => {
    const fresh = scratchSchema('oncemq_m');
    const ledgers = Array.from({ length: 5 }, () => new PostgresLedger({ pool, schema: fresh }));
    try {
      await Promise.all(ledgers.map((ledger) => ledger.init()));
      expect(await ledgers[0]?.migrate()).toBe(1);
      const { rows } = await pool.query<{ version: number }>(
        `SELECT version FROM "${fresh}".oncemq_ledger_schema ORDER BY version`,
      );
      expect(rows.map((r) => r.version)).toEqual([1]);
      const { rows: indexes } = await pool.query<{ indexname: string }>(
        "SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'oncemq_ledger' ORDER BY indexname",
        [fresh],
      );
      expect(indexes.map((i) => i.indexname)).toEqual([
        'oncemq_ledger_pkey',
        'oncemq_ledger_status_updated',
        'oncemq_ledger_stuck',
      ]);
    } finally {
      await dropSchema(pool, fresh);
    }
  });

  it('migrates ledgers of different tables into one fresh schema at once: the schema is made once, no starter fails', async () => {
    for (let round = 0; round < 3; round++) {
      const fresh = scratchSchema('oncemq_s');
      const ledgers = Array.from(
        { length: 6 },
        (_, n) => new PostgresLedger({ pool, schema: fresh, table: `ledger_${n}` }),
      );
      try {
        const outcomes = await Promise.allSettled(ledgers.map((ledger) => ledger.init()));
        expect(outcomes.filter((o) => o.status === 'rejected')).toEqual([]);
        const { rows } = await pool.query<{ n: string }>(
          "SELECT count(*) AS n FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'ledger\\_%' AND tablename NOT LIKE '%schema'",
          [fresh],
        );
        expect(Number(rows[0]?.n)).toBe(6);
      } finally {
        await dropSchema(pool, fresh);
      }
    }
  });

  it('joins the caller’s open transaction: the caller’s rollback undoes the claim and the effect, its commit keeps both', async () => {
    const ledger = new PostgresLedger({ pool, schema });
    await ledger.init();
    const client = await pool.connect();
    try {
      const joined = ledger.join(client);
      expect(joined.capabilities).toMatchObject({ transactional: true, leased: false });
      await client.query('BEGIN');
      const first = await joined.transaction(request('join-1'), async (tx) => {
        await addPoints(tx, 'join-user', 100);
        return null;
      });
      expect(first.status).toBe('acquired');
      await client.query('ROLLBACK');
      expect(await ledger.get('points', 'join-1')).toBeUndefined();
      expect(await balance('join-user')).toBe(0);

      await client.query('BEGIN');
      await addPoints(client, 'join-user', 1); // the caller's own write before the claim
      await expect(
        joined.transaction(request('join-1'), async (tx) => {
          await addPoints(tx, 'join-user', 100);
          throw new Error('handler failed');
        }),
      ).rejects.toThrow('handler failed');
      expect((await joined.transaction(request('join-1'), () => null)).status).toBe('acquired');
      expect((await joined.transaction(request('join-1'), () => null)).status).toBe('duplicate');
      await client.query('COMMIT');
      expect(await ledger.get('points', 'join-1')).toMatchObject({ status: 'SUCCESS' });
      expect(await balance('join-user')).toBe(1);
    } finally {
      client.release();
    }
  });

  it('accepts a client in the configuration to join (no leased claims on it)', async () => {
    const client = await pool.connect();
    try {
      const joined = new PostgresLedger({ client, schema, migrate: false });
      await joined.init();
      await client.query('BEGIN');
      expect((await joined.transaction(request('join-config'), () => null)).status).toBe('acquired');
      await client.query('COMMIT');
      expect(joined.capabilities.leased).toBe(false);
      await expect(joined.claim(request('join-config-leased'))).rejects.toBeInstanceOf(ConfigError);
    } finally {
      client.release();
    }
  });

  it('claims a new key with one insert that answers no row, and reads an existing key’s row with a statement of its own', async () => {
    // Every ledger statement on the checked-out clients, with the columns and rows it answered.
    const answers: { sql: string; columns: number; rows: number }[] = [];
    const recorded = (client: pg.PoolClient): pg.PoolClient =>
      new Proxy(client, {
        get(target, property, receiver) {
          if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
          return async (config: string | { text: string }, values?: unknown[]) => {
            const result: unknown = await target.query(config as string, values);
            // A migration's several statements answer an array of results: not recorded.
            if (!Array.isArray(result)) {
              const { fields, rows } = result as pg.QueryResult;
              answers.push({
                sql: typeof config === 'string' ? config : config.text,
                columns: fields.length,
                rows: rows.length,
              });
            }
            return result;
          };
        },
      });
    const ledger = new PostgresLedger({
      pool: { query: pool.query.bind(pool), connect: async () => recorded(await pool.connect()) },
      schema,
    });
    await ledger.init();
    answers.length = 0;
    const ledgerStatements = () =>
      answers
        .filter(({ sql }) => sql.includes('oncemq_ledger"'))
        .map(({ sql, columns, rows }) => ({ verb: sql.split(' ')[0], columns, rows }));

    expect((await ledger.transaction(request('shape-1'), () => null)).status).toBe('acquired');
    expect(ledgerStatements()).toEqual([{ verb: 'INSERT', columns: 0, rows: 0 }]);

    answers.length = 0;
    expect((await ledger.transaction(request('shape-1'), () => null)).status).toBe('duplicate');
    expect(ledgerStatements()).toEqual([
      { verb: 'INSERT', columns: 0, rows: 0 },
      { verb: 'SELECT', columns: 13, rows: 1 },
    ]);
  });

  it('refuses to report success when the handler swallowed a database error and PostgreSQL rolled back at COMMIT', async () => {
    const ledger = new PostgresLedger({ pool, schema });
    await ledger.init();
    const outcome = ledger.transaction(request('aborted'), async (tx) => {
      await addPoints(tx, 'aborted-user', 100);
      await tx.query('SELECT 1/0').catch(() => undefined);
      return null;
    });
    await expect(outcome).rejects.toBeInstanceOf(LedgerUnavailableError);
    expect(await ledger.get('points', 'aborted')).toBeUndefined();
    expect(await balance('aborted-user')).toBe(0);
  });

  it('wraps driver failures in LedgerUnavailableError with the driver error as cause', async () => {
    const ledger = new PostgresLedger({ connectionString: 'postgres://postgres@127.0.0.1:1/none' });
    const error = await ledger.init().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerUnavailableError);
    expect((error as Error).cause).toBeInstanceOf(Error);
    await ledger.close();
  });

  it('refuses unsafe schema names, overlong table names and ambiguous connection settings with a ConfigError', () => {
    expect(() => new PostgresLedger({ pool, schema: 'public; DROP SCHEMA x' })).toThrow(ConfigError);
    expect(() => new PostgresLedger({ pool, table: 't'.repeat(49) })).toThrow(/table/);
    expect(() => new PostgresLedger({})).toThrow(ConfigError);
    expect(() => new PostgresLedger({ pool, connectionString: service.url })).toThrow(ConfigError);
  });
});
