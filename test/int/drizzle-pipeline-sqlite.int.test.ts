import { join } from 'node:path';
import Database from 'better-sqlite3';
import { asc, sql } from 'drizzle-orm';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { integer as sqliteInteger, sqliteTable, text as sqliteText } from 'drizzle-orm/sqlite-core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOutbox, createPipeline, type PipelineConfig } from 'oncemq';
import { drizzleLedger, type DrizzleSqliteLedger } from 'oncemq/drizzle';
import { checkRollback } from 'oncemq/testing';
import { byUser, type SqliteDb } from '../support/drizzle-pipeline.js';
import {
  payment,
  paymentEnvelope,
  paymentEvents,
  scratchDir,
  type PaymentSucceeded,
} from '../support/points.js';
import { relayOnce } from '../support/relay.js';

describe('a pipeline on Drizzle (SQLite, better-sqlite3)', () => {
  const points = sqliteTable('points', {
    userId: sqliteText('user_id').primaryKey(),
    balance: sqliteInteger('balance').notNull(),
  });
  const addPoints = (db: SqliteDb, event: PaymentSucceeded): void => {
    db.insert(points)
      .values({ userId: event.userId, balance: event.amount })
      .onConflictDoUpdate({
        target: points.userId,
        set: { balance: sql`${points.balance} + ${event.amount}` },
      })
      .run();
  };

  let scratch: ReturnType<typeof scratchDir>;
  let path: string;
  let db: SqliteDb;
  let ledger: DrizzleSqliteLedger<SqliteDb>;
  /** Reads through a connection of its own: only committed rows. */
  let reader: SqliteDb;
  const balances = (): Record<string, number> =>
    byUser(reader.select().from(points).orderBy(asc(points.userId)).all());

  beforeEach(async () => {
    scratch = scratchDir();
    path = join(scratch.dir, 'app.db');
    db = drizzleSqlite(new Database(path, { timeout: 5000 }));
    db.$client.pragma('journal_mode = WAL');
    db.run(sql`CREATE TABLE points (user_id TEXT PRIMARY KEY, balance INTEGER NOT NULL)`);
    reader = drizzleSqlite(new Database(path, { readonly: true }));
    ledger = drizzleLedger(db);
    await ledger.init();
  });
  afterEach(async () => {
    await ledger.close();
    reader.$client.close();
    db.$client.close();
    scratch.remove();
  });

  const config = (handler: PipelineConfig<SqliteDb, PaymentSucceeded>['handler']) => ({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler,
  });

  it('hands the handler the Drizzle db inside the claim’s transaction and applies each event once however many copies arrive', async () => {
    const seen: boolean[] = [];
    const pipeline = createPipeline<SqliteDb, PaymentSucceeded>(
      config((event, ctx) => {
        seen.push(ctx.tx === db && ctx.tx.$client.inTransaction);
        addPoints(ctx.tx, event);
      }),
    );
    const events = paymentEvents(20);
    const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
    const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
    expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
    expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
    expect(seen).toEqual(Array.from({ length: 20 }, () => true));
    expect(Object.values(balances()).reduce((a, b) => a + b, 0)).toBe(20 * 100);
  });

  it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
    let fail = true;
    const pipeline = createPipeline<SqliteDb, PaymentSucceeded>(
      config(async (event, ctx) => {
        addPoints(ctx.tx, event);
        await new Promise((resolve) => setImmediate(resolve));
        if (fail) throw new Error('downstream refused');
      }),
    );
    const event = payment(7);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    expect(balances()).toEqual({});
    fail = false;
    expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('runs a synchronous Drizzle transaction of the handler as a savepoint of the claim’s: it rolls back with the claim', async () => {
    let fail = true;
    const pipeline = createPipeline<SqliteDb, PaymentSucceeded>(
      config((event, ctx) => {
        ctx.tx.transaction((tx) => {
          tx.insert(points).values({ userId: event.userId, balance: event.amount }).run();
        });
        if (fail) throw new Error('downstream refused');
      }),
    );
    const event = payment(4);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    expect(balances()).toEqual({});
    fail = false;
    expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('commits the application’s own writes with a claim in the work of ledger.transaction, and rolls them back with it', async () => {
    const event = payment(3);
    const request = {
      group: 'points',
      key: event.eventId,
      fingerprint: null,
      brokerId: 'b',
      topic: 'payments',
      leaseMs: 30_000,
    };
    await expect(
      ledger.transaction(request, (tx) => {
        addPoints(tx, event);
        throw new Error('the application rolls back');
      }),
    ).rejects.toThrow('the application rolls back');
    expect(await ledger.get('points', event.eventId)).toBeUndefined();
    expect(balances()).toEqual({});
    const won = await ledger.transaction(request, (tx) => {
      addPoints(tx, event);
      return null;
    });
    expect(won.status).toBe('acquired');
    expect((await ledger.transaction(request, () => null)).status).toBe('duplicate');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('writes outbox messages through ctx.tx in the claim’s transaction, relays them from a connection of its own, and refuses the db outside one and a synchronous transaction', async () => {
    const outbox = createOutbox({ ledger });
    const relayDb = new Database(path, { timeout: 5000 });
    try {
      await outbox.migrate(relayDb);
      const keys = () =>
        (
          relayDb.prepare('SELECT business_key FROM oncemq_outbox ORDER BY id').all() as {
            business_key: string;
          }[]
        ).map((r) => r.business_key);
      let fail = true;
      const pipeline = createPipeline<SqliteDb, PaymentSucceeded>(
        config(async (event, ctx) => {
          addPoints(ctx.tx, event);
          await outbox.add(ctx.tx, { topic: 'points-added', key: event.eventId, body: { n: 1 } });
          if (fail) throw new Error('downstream refused');
        }),
      );
      const event = payment(5);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(keys()).toEqual([]);
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(keys()).toEqual([event.eventId]);

      await expect(outbox.add(db, { topic: 't', key: 'outside', body: {} })).rejects.toThrow(
        /no transaction is open on the database/,
      );
      const inSync = await ledger.transaction(
        {
          group: 'points',
          key: 'sync',
          fingerprint: null,
          brokerId: 'b',
          topic: 'payments',
          leaseMs: 30_000,
        },
        async (tx) => {
          let added: Promise<unknown> = Promise.resolve();
          tx.transaction((inner) => {
            added = outbox.add(inner as unknown as SqliteDb, { topic: 't', key: 'sync', body: {} });
          });
          await expect(added).rejects.toThrow(/not a transaction of db\.transaction\(\)/);
          return null;
        },
      );
      expect(inSync.status).toBe('acquired');
      const other = drizzleSqlite(relayDb);
      await expect(
        ledger.transaction(
          {
            group: 'points',
            key: 'other',
            fingerprint: null,
            brokerId: 'b',
            topic: 'payments',
            leaseMs: 30_000,
          },
          () => outbox.add(other, { topic: 't', key: 'other', body: {} }).then(() => null),
        ),
      ).rejects.toThrow(/the Drizzle database the ledger was built on/);
      expect(keys()).toEqual([event.eventId]);
      expect(await relayOnce(outbox, relayDb)).toEqual([event.eventId]);
    } finally {
      relayDb.close();
    }
  });

  it('passes the rollback check when the handler writes through ctx.tx', async () => {
    const report = await checkRollback<SqliteDb, PaymentSucceeded>({
      pipeline: config(function addPointsInTheClaim(event, ctx) {
        addPoints(ctx.tx, event);
      }),
      envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
      observe: () => balances(),
    });
    expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
    expect(report.afterCommit).not.toEqual({});
  });
});
