import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, createEnvelope, type PipelineConfig } from 'oncemq';
import { PostgresLedger, type PgClientLike } from 'oncemq/postgres';
import { SqliteLedger } from 'oncemq/sqlite';
import { checkRollback, RollbackCheckError } from 'oncemq/testing';
import { findPostgres, pointsSchema, type PointsSchema } from '../support/postgres.js';
import { payment, paymentEnvelope, paymentEvents, type PaymentSucceeded } from '../support/points.js';

const postgres = await findPostgres();

describe('the rollback check on a SQLite ledger', () => {
  let db: Database.Database;
  let ledger: SqliteLedger<Database.Database>;
  beforeEach(() => {
    db = new Database(':memory:');
    db.exec('CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
    ledger = new SqliteLedger({ database: db });
  });
  afterEach(async () => {
    await ledger.close();
    db.close();
  });

  const balances = () => db.prepare('SELECT user_id, balance FROM points ORDER BY user_id').all();
  const config = (
    extra: Partial<PipelineConfig<Database.Database, PaymentSucceeded>> = {},
  ): PipelineConfig<Database.Database, PaymentSucceeded> => ({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler: function addPoints(event, ctx) {
      ctx.tx
        .prepare(
          'INSERT INTO points VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET balance = balance + excluded.balance',
        )
        .run(event.userId, event.amount);
    },
    ...extra,
  });

  it('passes for a handler writing through ctx.tx, and the control run commits its effect', async () => {
    const report = await checkRollback({
      pipeline: config(),
      envelopes: paymentEvents(4).map((event) => paymentEnvelope(event)),
      observe: balances,
    });
    expect(report.rolledBack).toBe(4);
    expect(report.before).toEqual([]);
    expect(report.afterRollback).toEqual([]);
    expect(report.afterCommit).toEqual(expect.arrayContaining([{ user_id: 'user-0', balance: 100 }]));
  });

  it('refuses an observe() that never sees the handler’s effect (no-effect-observed)', async () => {
    const check = checkRollback({
      pipeline: config(),
      envelopes: [paymentEnvelope(payment(1))],
      observe: () => db.prepare("SELECT COUNT(*) AS n FROM points WHERE user_id = 'nobody'").get(),
    });
    await expect(check).rejects.toMatchObject({ name: 'RollbackCheckError', reason: 'no-effect-observed' });
  });

  it('refuses deliveries that never reach the handler (not-run), naming the outcome', async () => {
    const check = checkRollback({
      pipeline: config(),
      envelopes: [createEnvelope({ brokerId: 'b', topic: 'payments', body: { userId: 'u' } })],
      observe: balances,
    });
    await expect(check).rejects.toThrow(RollbackCheckError);
    await expect(check).rejects.toThrow(/dead \(missing-key\)/);
  });

  it('refuses leased mode, whose effects are outside the database by design', async () => {
    await expect(
      checkRollback({
        pipeline: config({ mode: 'leased' }),
        envelopes: [paymentEnvelope(payment(2))],
        observe: balances,
      }),
    ).rejects.toThrow(ConfigError);
  });
});

describe.skipIf(!postgres.available)('the rollback check on a PostgreSQL pool ledger', () => {
  let points: PointsSchema;
  let ledger: PostgresLedger;
  beforeEach(async () => {
    points = await pointsSchema(postgres.url, 4);
    ledger = new PostgresLedger({ pool: points.pool, schema: points.schema });
  });
  afterEach(async () => {
    await ledger.close();
    await points.close();
  });

  const config = (
    handler: PipelineConfig<PgClientLike, PaymentSucceeded>['handler'],
  ): PipelineConfig<PgClientLike, PaymentSucceeded> => ({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler,
  });

  it('passes for a handler writing through ctx.tx', async () => {
    const report = await checkRollback({
      pipeline: config(async (event, ctx) => {
        await points.addPoints(ctx.tx, event.userId, event.amount);
      }),
      envelopes: [paymentEnvelope(payment(1))],
      observe: () => points.balance('user-1'),
    });
    expect(report).toMatchObject({ before: 0, afterRollback: 0, afterCommit: 100 });
  });

  it('fails for a handler writing through the application’s pool instead of ctx.tx', async () => {
    const check = checkRollback({
      pipeline: config(async function addPointsOnThePool(event) {
        await points.addPoints(points.pool, event.userId, event.amount);
      }),
      envelopes: [paymentEnvelope(payment(1))],
      observe: () => points.balance('user-1'),
    });
    await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
    await expect(check).rejects.toThrow(
      /'addPointsOnThePool' of group 'points' wrote outside the claim's transaction/,
    );
  });
});
