import { join } from 'node:path';
import Database from 'better-sqlite3';
import { DataSource, EntitySchema, type EntityManager } from 'typeorm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  createOutbox,
  createPipeline,
  LedgerUnavailableError,
  type PipelineConfig,
} from 'oncemq';
import { checkRollback } from 'oncemq/testing';
import { typeormLedger, type BridgedLedger } from 'oncemq/typeorm';
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
  id?: number;
  eventId: string;
  userId: string;
  amount: number;
}

// TypeORM declares EntitySchema's options as a class; an object literal is how its docs give them
// eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
const credits = new EntitySchema<Credit>({
  name: 'Credit',
  tableName: 'credits',
  columns: {
    id: { type: Number, primary: true, generated: 'increment' },
    eventId: { type: String, name: 'event_id' },
    userId: { type: String, name: 'user_id' },
    amount: { type: Number },
  },
});

/** The better-sqlite3 connection TypeORM runs every statement of `dataSource` on. */
const connectionOf = (dataSource: DataSource): Database.Database =>
  (dataSource.driver as unknown as { databaseConnection: Database.Database }).databaseConnection;

describe('a pipeline on TypeORM (SQLite, better-sqlite3)', () => {
  let scratch: ReturnType<typeof scratchDir>;
  let path: string;
  let dataSource: DataSource;
  let ledger: BridgedLedger<EntityManager>;
  /** Reads through a connection of its own: only committed rows. */
  let reader: Database.Database;

  beforeEach(async () => {
    scratch = scratchDir();
    path = join(scratch.dir, 'app.db');
    createCreditsTable(path);
    dataSource = await new DataSource({
      type: 'better-sqlite3',
      database: path,
      entities: [credits],
    }).initialize();
    reader = new Database(path, { readonly: true });
    ledger = typeormLedger(dataSource);
    await ledger.init();
  });
  afterEach(async () => {
    await ledger.close();
    reader.close();
    await dataSource.destroy();
    scratch.remove();
  });

  /** Credits the payment's points through `manager`: the claim's transaction when it is ctx.tx. */
  const credit = (manager: EntityManager, event: PaymentSucceeded) =>
    manager
      .getRepository(credits)
      .save({ eventId: event.eventId, userId: event.userId, amount: event.amount });

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

  it('hands the handler the EntityManager of a TypeORM transaction and applies each event once however many copies arrive', async () => {
    const seen: boolean[] = [];
    const pipeline = createPipeline(
      config(async (event, ctx) => {
        seen.push(ctx.tx.queryRunner?.isTransactionActive === true && connectionOf(dataSource).inTransaction);
        await credit(ctx.tx, event);
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

  it('rolls back what save() wrote (it opens no transaction of its own in the claim’s) when the handler throws after it, and the redelivery applies it once', async () => {
    let fail = true;
    const pipeline = createPipeline(
      config(async (event, ctx) => {
        await credit(ctx.tx, event);
        await ctx.tx.transaction((inner) => credit(inner, { ...event, amount: 1 })); // a savepoint
        if (fail) throw new Error('downstream refused');
      }),
    );
    const event = payment(7);
    expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
    expect(balances()).toEqual({});
    fail = false;
    expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
    expect(balances()).toEqual({ [event.userId]: 101 });
  });

  it('claims inside a TypeORM transaction of the application, which commits or rolls back the claim with its own writes', async () => {
    const event = payment(3);
    const request = { ...pointsRequest(event.eventId), group: 'points' };
    await expect(
      dataSource.transaction(async (manager) => {
        const result = await ledger.join(manager).transaction(request, async (tx) => {
          expect(tx).toBe(manager);
          await credit(tx, event);
          return null;
        });
        expect(result.status).toBe('acquired');
        throw new Error('the application rolls back');
      }),
    ).rejects.toThrow('the application rolls back');
    expect(await ledger.get('points', event.eventId)).toBeUndefined();
    expect(balances()).toEqual({});

    await dataSource.transaction(async (manager) => {
      await ledger.join(manager).transaction(request, async (tx) => {
        await credit(tx, event);
        return null;
      });
    });
    expect((await ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
    const again = await dataSource.transaction((manager) =>
      ledger.join(manager).transaction(request, () => null),
    );
    expect(again.status).toBe('duplicate');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('refuses a claim while a transaction of the application is open on TypeORM’s one connection, rather than nest in it', async () => {
    const request = { ...pointsRequest('nested'), group: 'points' };
    let ran = false;
    await dataSource.transaction(async () => {
      await expect(
        ledger.transaction(request, () => {
          ran = true;
          return null;
        }),
      ).rejects.toThrow(LedgerUnavailableError);
      await expect(ledger.claim(request)).rejects.toThrow(/claim with ledger\.join\(manager\)/);
    });
    expect(ran).toBe(false);
    expect(await ledger.get('points', 'nested')).toBeUndefined();
    // a delivery meanwhile is unavailable, not charged to the message, and applied once the connection is free
    const pipeline = createPipeline(config((event, ctx) => credit(ctx.tx, event).then(() => undefined)));
    const event = payment(4);
    const during = await dataSource.transaction(() => pipeline.process(paymentEnvelope(event)));
    expect(during).toMatchObject({ kind: 'retry', action: 'retry' });
    expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
    expect(balances()).toEqual({ [event.userId]: 100 });
  });

  it('writes outbox messages in the claim’s transaction, relays them from a connection of its own, and refuses a manager outside a transaction', async () => {
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
      const pipeline = createPipeline({
        ...config(async (event, ctx) => {
          await credit(ctx.tx, event);
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
      await dataSource.transaction(async (manager) => {
        ended = manager;
        await outbox.add(manager, { topic: 'points-added', key: 'committed', body: { n: 2 } });
      });
      expect(keys()).toEqual([event.eventId, 'committed']);
      const other = await new DataSource({ type: 'better-sqlite3', database: path }).initialize();
      try {
        for (const bare of [dataSource.manager, ended as EntityManager]) {
          expect(() => ledger.join(bare)).toThrow(ConfigError);
          await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
            /expected the EntityManager of a TypeORM transaction/,
          );
        }
        await other.transaction((manager) => {
          expect(() => ledger.join(manager)).toThrow(/the TypeORM data source the ledger was built on/);
          return Promise.resolve();
        });
      } finally {
        await other.destroy();
      }
      expect(keys()).toEqual([event.eventId, 'committed']);

      expect(await relayOnce(outbox, relayDb)).toEqual([event.eventId, 'committed']);
    } finally {
      relayDb.close();
    }
  });

  it('passes the rollback check when the handler writes through ctx.tx', async () => {
    const report = await checkRollback<EntityManager, PaymentSucceeded>({
      pipeline: config(async function creditInTheClaim(event, ctx) {
        await credit(ctx.tx, event);
      }),
      envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
      observe: () => balances(),
    });
    expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
    expect(report.afterCommit).toEqual({ 'user-0': 100, 'user-1': 100, 'user-2': 100 });
  });

  it('passes the rollback check when the handler writes through dataSource.manager, which TypeORM runs on the same connection, inside the claim’s transaction', async () => {
    const report = await checkRollback<EntityManager, PaymentSucceeded>({
      pipeline: config(async function creditOnTheAppManager(event) {
        await credit(dataSource.manager, event);
      }),
      envelopes: paymentEvents(2, 'global').map((event) => paymentEnvelope(event)),
      observe: () => balances(),
    });
    expect(report).toMatchObject({ rolledBack: 2, before: {}, afterRollback: {} });
  });
});
