import { join } from 'node:path';
import { EntitySchema } from '@mikro-orm/core';
import { MikroORM, type EntityManager } from '@mikro-orm/better-sqlite';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, createOutbox, createPipeline, type PipelineConfig } from 'oncemq';
import { mikroOrmLedger, type BridgedLedger } from 'oncemq/mikro-orm';
import { checkRollback } from 'oncemq/testing';
import { relayOnce } from '../support/relay.js';
import { createCreditsTable, creditBalances } from '../support/sqlite-credits.js';
import {
  payment,
  paymentEnvelope,
  paymentEvents,
  pointsRequest,
  scratchDir,
  type PaymentSucceeded,
} from '../support/points.js';

/** One credit of points per applied event: a row per effect, so an effect applied twice shows. */
interface Credit {
  id: number;
  eventId: string;
  userId: string;
  amount: number;
}

const credits = new EntitySchema<Credit>({
  name: 'Credit',
  tableName: 'credits',
  properties: {
    id: { type: 'number', primary: true, autoincrement: true },
    eventId: { type: 'string', fieldName: 'event_id' },
    userId: { type: 'string', fieldName: 'user_id' },
    amount: { type: 'number' },
  },
});

/** The ORM on `path`; a short wait for Knex's one connection, so that a handler waiting for it fails fast. */
const open = (path: string, options: { disableTransactions?: boolean } = {}) =>
  MikroORM.init({
    dbName: path,
    entities: [credits],
    driverOptions: { acquireConnectionTimeout: 500 },
    ...options,
  });

describe('a pipeline on MikroORM (SQLite, @mikro-orm/better-sqlite)', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let path: string;
  let orm: Awaited<ReturnType<typeof open>>;
  let ledger: BridgedLedger<EntityManager>;
  /** Reads through a connection of its own: only committed rows. */
  let reader: Database.Database;

  beforeEach(async () => {
    scratch = scratchDir();
    path = join(scratch.dir, 'app.db');
    createCreditsTable(path);
    orm = await open(path);
    reader = new Database(path, { readonly: true });
    ledger = mikroOrmLedger(orm.em);
    await ledger.init();
  });
  afterEach(async () => {
    await ledger.close();
    reader.close();
    await orm.close();
    scratch.remove();
  });

  /** Credits the payment's points in `em`'s unit of work, flushed when its transaction commits. */
  const credit = (em: EntityManager, event: PaymentSucceeded): void => {
    em.create(credits, { eventId: event.eventId, userId: event.userId, amount: event.amount });
  };

  /** Points per user, committed. */
  const balances = (): Record<string, number> => creditBalances(reader);

  const config = (
    handler: PipelineConfig<EntityManager, PaymentSucceeded>['handler'],
  ): PipelineConfig<EntityManager, PaymentSucceeded> => ({
    ledger,
    group: 'points',
    key: { jsonPath: 'eventId' },
    handler,
  });

  it('hands the handler the EntityManager of a MikroORM transaction, flushes it in the claim, and applies each event once however many copies arrive', async () => {
    const seen = new Set<EntityManager>();
    const pipeline = createPipeline(
      config((event, ctx) => {
        expect(ctx.tx.isInTransaction()).toBe(true);
        seen.add(ctx.tx);
        credit(ctx.tx, event);
      }),
    );
    const events = paymentEvents(20);
    const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
    const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
    expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
    expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
    // a fresh EntityManager per transaction: no identity map shared between messages
    expect(seen.size).toBe(20);
    expect(seen.has(orm.em)).toBe(false);
    expect(Object.values(balances()).reduce((a, b) => a + b, 0)).toBe(20 * 100);
  });

  it('rolls back the flushed write of a handler that throws after it, and the redelivery applies it once', async () => {
    let fail = true;
    const pipeline = createPipeline(
      config(async (event, ctx) => {
        credit(ctx.tx, event);
        await ctx.tx.flush();
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

  it('answers retry when the flush after the handler fails, and the claim rolls back with it', async () => {
    const pipeline = createPipeline(
      config((event, ctx) => {
        ctx.tx.create(credits, { eventId: event.eventId, userId: event.userId, amount: null as never });
      }),
    );
    const event = payment(8);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    expect(await ledger.get('points', event.eventId)).toBeUndefined();
    expect(balances()).toEqual({});
  });

  it('claims inside a MikroORM transaction of the application, which commits or rolls back the claim with its own writes', async () => {
    const event = payment(3);
    const request = { ...pointsRequest(event.eventId), group: 'points' };
    await expect(
      orm.em.fork().transactional(async (em) => {
        const result = await ledger.join(em).transaction(request, (tx) => {
          expect(tx).toBe(em);
          credit(tx, event);
          return Promise.resolve(null);
        });
        expect(result.status).toBe('acquired');
        throw new Error('the application rolls back');
      }),
    ).rejects.toThrow('the application rolls back');
    expect(await ledger.get('points', event.eventId)).toBeUndefined();
    expect(balances()).toEqual({});

    await orm.em.fork().transactional(async (em) => {
      await ledger.join(em).transaction(request, (tx) => {
        credit(tx, event);
        return Promise.resolve(null);
      });
    });
    expect((await ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
    const again = await orm.em.fork().transactional((em) => ledger.join(em).transaction(request, () => null));
    expect(again.status).toBe('duplicate');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('refuses an unjoined claim inside a transaction of the application, and makes one that runs alongside it wait for the connection', async () => {
    const request = { ...pointsRequest('inside'), group: 'points' };
    await orm.em.transactional(async () => {
      await expect(ledger.transaction(request, () => null)).rejects.toThrow(
        /claim in it with ledger\.join\(em\)/,
      );
    });
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const application = orm.em.fork().transactional(async (em) => {
      await em.execute('SELECT 1');
      await held;
    });
    const claim = ledger.transaction({ ...request, key: 'alongside' }, () => null);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(reader.prepare('SELECT COUNT(*) AS n FROM oncemq_ledger').get()).toEqual({ n: 0 });
    release();
    await application;
    expect((await claim).status).toBe('acquired');
  });

  it('writes outbox messages in the MikroORM transaction, relays them from a connection of its own, and refuses an EntityManager outside a transaction', async () => {
    const outbox = createOutbox({ ledger });
    const relayDb = new Database(path, { timeout: 5000 });
    const other = await open(join(scratch.dir, 'other.db'));
    try {
      await outbox.migrate(relayDb);
      const keys = () =>
        (
          relayDb.prepare('SELECT business_key FROM oncemq_outbox ORDER BY id').all() as {
            business_key: string;
          }[]
        ).map((r) => r.business_key);
      let fail = true;
      const pipeline = createPipeline({
        ...config(async (event, ctx) => {
          credit(ctx.tx, event);
          await ctx.outbox.add({ topic: 'points-added', key: event.eventId, body: { n: 1 } });
          if (fail) throw new Error('downstream refused');
        }),
        outbox,
      });
      const event = payment(5);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(keys()).toEqual([]);
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(keys()).toEqual([event.eventId]);

      let ended: EntityManager | undefined;
      await orm.em.fork().transactional(async (em) => {
        ended = em;
        await outbox.add(em, { topic: 'points-added', key: 'committed', body: { n: 2 } });
      });
      expect(keys()).toEqual([event.eventId, 'committed']);
      for (const bare of [orm.em, orm.em.fork(), ended as EntityManager]) {
        expect(() => ledger.join(bare)).toThrow(ConfigError);
        await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
          /expected the EntityManager of a MikroORM transaction/,
        );
      }
      await other.em.fork().transactional((em) => {
        expect(() => ledger.join(em)).toThrow(/the MikroORM instance the ledger was built on/);
        return Promise.resolve();
      });
      expect(keys()).toEqual([event.eventId, 'committed']);

      expect(await relayOnce(outbox, relayDb)).toEqual([event.eventId, 'committed']);
    } finally {
      relayDb.close();
      await other.close();
    }
  });

  it('refuses to claim through an ORM whose transactions are disabled, running no handler', async () => {
    const disabled = await open(path, { disableTransactions: true });
    try {
      const bare = mikroOrmLedger(disabled.em, { migrate: false });
      let ran = false;
      await expect(
        bare.transaction({ ...pointsRequest('no-tx'), group: 'points' }, () => {
          ran = true;
          return Promise.resolve(null);
        }),
      ).rejects.toThrow(/expected the EntityManager of a MikroORM transaction/);
      expect(ran).toBe(false);
      expect(await ledger.get('points', 'no-tx')).toBeUndefined();
    } finally {
      await disabled.close();
    }
  });

  it('passes the rollback check when the handler writes through ctx.tx', async () => {
    const report = await checkRollback<EntityManager, PaymentSucceeded>({
      pipeline: config(function creditInTheClaim(event, ctx) {
        credit(ctx.tx, event);
      }),
      envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
      observe: () => balances(),
    });
    expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
    expect(report.afterCommit).toEqual({ 'user-0': 100, 'user-1': 100, 'user-2': 100 });
  });

  it('passes the rollback check when the handler writes through orm.em, which MikroORM resolves to the transaction’s', async () => {
    const report = await checkRollback<EntityManager, PaymentSucceeded>({
      pipeline: config(async function creditOnTheGlobalEm(event) {
        await orm.em.insert(credits, { eventId: event.eventId, userId: event.userId, amount: 100 });
      }),
      envelopes: paymentEvents(2, 'global').map((event) => paymentEnvelope(event)),
      observe: () => balances(),
    });
    expect(report).toMatchObject({ rolledBack: 2, before: {}, afterRollback: {} });
  });

  it('lets no write of a fork of its own escape: it waits for the connection the claim holds, fails, and the delivery is retried', async () => {
    const pipeline = createPipeline(
      config(async function creditOnAFork(event) {
        await orm.em.fork().insert(credits, { eventId: event.eventId, userId: event.userId, amount: 100 });
      }),
    );
    const event = payment(1);
    const outcome = await pipeline.process(paymentEnvelope(event));
    expect(outcome.kind).toBe('retry');
    expect(String(outcome.kind === 'retry' ? outcome.error : '')).toMatch(/Timeout acquiring a connection/);
    expect((await ledger.get('points', event.eventId))?.status).toBe('FAIL');
    expect(balances()).toEqual({});
  });
});
