import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOutbox, createPipeline, type PipelineConfig } from 'oncemq';
import { kyselyLedger, type BridgedLedger } from 'oncemq/kysely';
import type { Db, PointsDb, Trx } from '../support/kysely-pipeline.js';
import {
  payment,
  paymentEnvelope,
  paymentEvents,
  scratchDir,
  type PaymentSucceeded,
} from '../support/points.js';
import { kyselyOnSqlite } from '../support/sqlite-builders.js';

describe('a pipeline on Kysely (SQLite): one connection, held by the claim', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let path: string;
  let app: { db: Db; database: Database.Database };
  let ledger: BridgedLedger<Trx>;
  const others: Db[] = [];
  const addPoints = (on: Db, event: PaymentSucceeded) =>
    on
      .insertInto('points')
      .values({ user_id: event.userId, balance: event.amount })
      .onConflict((oc) =>
        oc.column('user_id').doUpdateSet((eb) => ({ balance: eb('points.balance', '+', event.amount) })),
      )
      .execute();
  /** Reads the committed balances through a connection of its own. */
  const balances = (): Record<string, number> => {
    const reader = new Database(path, { readonly: true });
    try {
      const rows = reader.prepare('SELECT user_id, balance FROM points ORDER BY user_id').all() as {
        user_id: string;
        balance: number;
      }[];
      return Object.fromEntries(rows.map((r) => [r.user_id, r.balance]));
    } finally {
      reader.close();
    }
  };

  beforeEach(async () => {
    scratch = scratchDir();
    path = join(scratch.dir, 'app.db');
    app = kyselyOnSqlite<PointsDb>(path);
    await app.db.schema
      .createTable('points')
      .addColumn('user_id', 'text', (c) => c.primaryKey())
      .addColumn('balance', 'integer', (c) => c.notNull())
      .execute();
    ledger = kyselyLedger(app.db, { database: app.database });
    await ledger.init();
  });
  afterEach(async () => {
    await ledger.close();
    await Promise.all(others.splice(0).map((db) => db.destroy()));
    await app.db.destroy();
    scratch.remove();
  });

  const config = (handler: PipelineConfig<Trx, PaymentSucceeded>['handler']) => ({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler,
  });

  it('makes the application’s db inside the handler wait for the connection the claim holds; abandoned, its write runs once the claim’s transaction has ended, outside it', async () => {
    const pipeline = createPipeline<Trx, PaymentSucceeded>(
      config(async (event, ctx) => {
        await addPoints(ctx.tx, event);
        const late = addPoints(app.db, { ...event, userId: 'late' });
        const waited = await Promise.race([
          late.then(() => 'ran'),
          new Promise((resolve) => setTimeout(() => resolve('still waiting'), 200)),
        ]);
        expect(waited).toBe('still waiting');
        throw new Error('gave up waiting');
      }),
    );
    const event = payment(1);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    await app.db.selectFrom('points').selectAll().execute(); // the queued write has run by now
    expect(balances()).toEqual({ late: 100 });
  });

  it('makes a claim on a second Kysely instance wait for the write lock of an open claim with the event loop running, not in SQLite: both commit', async () => {
    const other = kyselyOnSqlite<PointsDb>(path);
    others.push(other.db);
    const otherLedger = kyselyLedger(other.db, { database: other.database });
    await otherLedger.init();
    try {
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      const first = createPipeline<Trx, PaymentSucceeded>(
        config(async (event, ctx) => {
          await addPoints(ctx.tx, event); // the claim's transaction holds the write lock from here
          entered();
          await new Promise((resolve) => setTimeout(resolve, 300)); // a timer: it fires only if the thread is free
        }),
      ).process(paymentEnvelope(payment(1)));
      await inside;
      const started = Date.now();
      const second = await createPipeline<Trx, PaymentSucceeded>({
        ...config(async (event, ctx) => {
          await addPoints(ctx.tx, event);
        }),
        ledger: otherLedger,
      }).process(paymentEnvelope(payment(2)));
      expect(second.kind).toBe('executed');
      expect(Date.now() - started).toBeLessThan(4_000); // well inside the 5 s busy timeout of SQLite's own wait
      expect((await first).kind).toBe('executed');
      expect(balances()).toEqual({ 'user-1': 100, 'user-2': 100 });
    } finally {
      await otherLedger.close();
    }
  });

  it('lets consumers on two connections to one file process copies at once: each event is applied once, and no claim fails on the write lock', async () => {
    const other = kyselyOnSqlite<PointsDb>(path);
    others.push(other.db);
    const otherLedger = kyselyLedger(other.db, { database: other.database });
    try {
      const consumer = (l: BridgedLedger<Trx>) =>
        createPipeline<Trx, PaymentSucceeded>({
          ...config(async (event, ctx) => {
            await addPoints(ctx.tx, event);
            await new Promise((resolve) => setTimeout(resolve, 1)); // the handler awaits: the lock is held across turns
          }),
          ledger: l,
        });
      const [one, two] = [consumer(ledger), consumer(otherLedger)];
      const events = paymentEvents(10);
      const copies = [...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(
        copies.map((envelope, i) => (i % 2 === 0 ? one : two).process(envelope)),
      );
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(10);
      expect(outcomes.filter((o) => o.kind === 'duplicate')).toHaveLength(10);
      expect(Object.values(balances()).reduce((a, b) => a + b, 0)).toBe(10 * 100);
    } finally {
      await otherLedger.close();
    }
  });

  it('refuses an ended transaction, a database that is not the dialect’s, a SQLite Kysely without its database and the options of a server ledger', async () => {
    let ended: Trx | undefined;
    await app.db.transaction().execute((trx) => {
      ended = trx;
      return Promise.resolve();
    });
    const over = ended as Trx;
    expect(() => ledger.join(over)).toThrow(/this Kysely transaction has ended/);
    const outbox = createOutbox({ ledger });
    await expect(outbox.add(over, { topic: 't', key: 'late', body: {} })).rejects.toThrow(/has ended/);

    const stranger = new Database(path);
    try {
      const wrong = kyselyLedger(app.db, { database: stranger });
      await expect(wrong.init()).rejects.toThrow(/not the one under the Kysely instance/);
      await wrong.close();
    } finally {
      stranger.close();
    }
    expect(() => kyselyLedger(app.db)).toThrow(
      /needs the better-sqlite3 Database given to its SqliteDialect/,
    );
    expect(() => kyselyLedger(app.db, { database: app.database, schema: 'x' } as never)).toThrow(
      /schema: is not an option of a sqlite ledger/,
    );
    const onPg = new Kysely<PointsDb>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' }),
      }),
    });
    expect(() => kyselyLedger(onPg, { database: app.database })).toThrow(/does not use SqliteDialect/);
  });
});
