import { EntitySchema, type EntityManager, type MikroORM } from '@mikro-orm/core';
import { MikroORM as MysqlOrm } from '@mikro-orm/mysql';
import { MikroORM as PostgresOrm } from '@mikro-orm/postgresql';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  createOutbox,
  createPipeline,
  createRelay,
  type OutgoingMessage,
  type PipelineConfig,
} from 'oncemq';
import { mikroOrmBridge, mikroOrmLedger, type BridgedLedger } from 'oncemq/mikro-orm';
import { checkRollback, injectCommitFailures, RollbackCheckError } from 'oncemq/testing';
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { findPostgres, scratchSchema } from '../support/postgres.js';
import {
  payment,
  paymentEnvelope,
  paymentEvents,
  pointsRequest,
  type PaymentSucceeded,
} from '../support/points.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** One credit of points per applied event: a row per effect, so an effect applied twice shows. */
interface Credit {
  id: number;
  eventId: string;
  userId: string;
  amount: number;
}

function creditEntity(tableName: string, schema?: string): EntitySchema<Credit> {
  return new EntitySchema<Credit>({
    name: 'Credit',
    tableName,
    schema,
    properties: {
      id: { type: 'number', primary: true, autoincrement: true },
      eventId: { type: 'string', fieldName: 'event_id' },
      userId: { type: 'string', fieldName: 'user_id' },
      amount: { type: 'number' },
    },
  });
}

interface World {
  readonly orm: MikroORM;
  readonly credits: EntitySchema<Credit>;
  readonly ledger: BridgedLedger<EntityManager>;
  /** Where this world's ledger table lives (its schema or table option). */
  readonly where: { readonly schema?: string; readonly table?: string };
  /** Where this world's outbox lives. */
  readonly outbox: { readonly table: string; readonly schema?: string };
  /** The qualified, quoted outbox table. */
  readonly outboxTable: string;
  readonly close: () => Promise<void>;
}

async function postgresWorld(): Promise<World> {
  const schema = scratchSchema('oncemq_mikrop');
  const credits = creditEntity('credits', schema);
  const orm: MikroORM = await PostgresOrm.init({
    clientUrl: postgres.url,
    pool: { min: 0, max: 6 },
    entities: [credits],
  });
  await orm.em.getConnection().execute(`CREATE SCHEMA "${schema}"`);
  await orm.em
    .getConnection()
    .execute(
      `CREATE TABLE "${schema}".credits (id serial PRIMARY KEY, event_id text NOT NULL, user_id text NOT NULL, amount int NOT NULL)`,
    );
  return {
    orm,
    credits,
    ledger: mikroOrmLedger(orm.em, { schema }),
    where: { schema },
    outbox: { table: 'oncemq_outbox', schema },
    outboxTable: `"${schema}".oncemq_outbox`,
    close: async () => {
      await orm.em.getConnection().execute(`DROP SCHEMA "${schema}" CASCADE`);
    },
  };
}

async function mysqlWorld(): Promise<World> {
  const table = uniqueTable('mikrop');
  const credits = creditEntity(`${table}_credits`);
  const orm: MikroORM = await MysqlOrm.init({
    clientUrl: mysql.url,
    pool: { min: 0, max: 6 },
    entities: [credits],
  });
  await orm.em
    .getConnection()
    .execute(
      `CREATE TABLE \`${table}_credits\` (id INT AUTO_INCREMENT PRIMARY KEY, event_id VARCHAR(64) NOT NULL, user_id VARCHAR(64) NOT NULL, amount INT NOT NULL)`,
    );
  return {
    orm,
    credits,
    ledger: mikroOrmLedger(orm.em, { table }),
    where: { table },
    outbox: { table: `${table}_ob` },
    outboxTable: `\`${table}_ob\``,
    close: async () => {
      for (const name of [`${table}_credits`, table, `${table}_schema`, `${table}_ob`, `${table}_ob_keys`]) {
        await orm.em.getConnection().execute(`DROP TABLE IF EXISTS \`${name}\``);
      }
    },
  };
}

for (const [database, open, available] of [
  ['PostgreSQL', postgresWorld, postgres.available],
  ['MariaDB', mysqlWorld, mysql.available],
] as const) {
  describe.skipIf(!available)(`a pipeline on MikroORM (${database})`, () => {
    let w: World;
    beforeEach(async () => {
      w = await open();
      await w.ledger.init();
    });
    afterEach(async () => {
      await w.ledger.close();
      await w.close();
      await w.orm.close();
    });

    /** Credits the payment's points in `em`'s unit of work, flushed when its transaction commits. */
    const credit = (em: EntityManager, event: PaymentSucceeded): void => {
      em.create(w.credits, { eventId: event.eventId, userId: event.userId, amount: event.amount });
    };

    /** Points per user, read on a fresh EntityManager outside any claim. */
    const balances = async (): Promise<Record<string, number>> => {
      const rows = await w.orm.em.fork().find(w.credits, {}, { orderBy: { id: 'asc' } });
      const totals: Record<string, number> = {};
      for (const row of rows) totals[row.userId] = (totals[row.userId] ?? 0) + row.amount;
      return totals;
    };

    const config = (
      handler: PipelineConfig<EntityManager, PaymentSucceeded>['handler'],
    ): PipelineConfig<EntityManager, PaymentSucceeded> => ({
      ledger: w.ledger,
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
      expect(seen.has(w.orm.em)).toBe(false);
      expect(await w.orm.em.fork().count(w.credits)).toBe(20);
      const total = Object.values(await balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(20 * 100);
    });

    it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
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
      expect(await balances()).toEqual({});
      fail = false;
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(await balances()).toEqual({ [event.userId]: 100 });
    });

    it('answers retry when the flush after the handler fails, and the claim rolls back with it', async () => {
      const pipeline = createPipeline(
        config((event, ctx) => {
          ctx.tx.create(w.credits, { eventId: event.eventId, userId: event.userId, amount: null as never });
        }),
      );
      const event = payment(8);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await balances()).toEqual({});
    });

    it('claims inside a MikroORM transaction of the application, which commits or rolls back the claim with its own writes', async () => {
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
        w.orm.em.fork().transactional(async (em) => {
          const result = await w.ledger.join(em).transaction(request, (tx) => {
            expect(tx).toBe(em);
            credit(tx, event);
            return Promise.resolve(null);
          });
          expect(result.status).toBe('acquired');
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await balances()).toEqual({});

      await w.orm.em.fork().transactional(async (em) => {
        await w.ledger.join(em).transaction(request, (tx) => {
          credit(tx, event);
          return Promise.resolve(null);
        });
      });
      expect((await w.ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
      const again = await w.orm.em
        .fork()
        .transactional((em) => w.ledger.join(em).transaction(request, () => null));
      expect(again.status).toBe('duplicate');
      expect(await balances()).toEqual({ [event.userId]: 100 });
    });

    it('writes outbox messages in the MikroORM transaction, relays them through the ORM, and refuses an EntityManager outside a transaction', async () => {
      const outbox = createOutbox({ ledger: w.ledger, ...w.outbox });
      const bridge = mikroOrmBridge(w.orm.em);
      await outbox.migrate(bridge);
      const pending = async (): Promise<string[]> => {
        const rows = (await w.orm.em
          .getConnection()
          .execute(`SELECT business_key FROM ${w.outboxTable} WHERE sent_at IS NULL ORDER BY id`)) as {
          business_key: string;
        }[];
        return rows.map((r) => r.business_key);
      };
      await expect(
        w.orm.em.fork().transactional(async (em) => {
          await outbox.add(em, { topic: 'points-added', key: 'rolled-back', body: { n: 1 } });
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      let ended: EntityManager | undefined;
      await w.orm.em.fork().transactional(async (em) => {
        ended = em;
        await outbox.add(em, { topic: 'points-added', key: 'committed', body: { n: 2 } });
      });
      expect(await pending()).toEqual(['committed']);

      for (const bare of [w.orm.em, w.orm.em.fork(), ended as EntityManager]) {
        expect(() => w.ledger.join(bare)).toThrow(ConfigError);
        await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
          /expected the EntityManager of a MikroORM transaction/,
        );
      }
      expect(await pending()).toEqual(['committed']);

      const sent: OutgoingMessage[] = [];
      const relay = createRelay({
        outbox,
        database: bridge,
        listen: false,
        transport: {
          name: 'memory',
          publish: (message) => {
            sent.push(message);
            return Promise.resolve({ brokerId: `m-${sent.length}`, topic: message.topic });
          },
        },
      });
      expect(await relay.runOnce()).toEqual({ claimed: 1, published: 1, failed: 0 });
      expect(sent.map((m) => m.key)).toEqual(['committed']);
      expect(await pending()).toEqual([]);
    });

    it('refuses to claim through an ORM whose transactions are disabled, running no handler', async () => {
      const Orm = database === 'PostgreSQL' ? PostgresOrm : MysqlOrm;
      const url = database === 'PostgreSQL' ? postgres.url : mysql.url;
      const orm: MikroORM = await Orm.init({
        clientUrl: url,
        entities: [w.credits],
        disableTransactions: true,
      });
      try {
        const ledger = mikroOrmLedger(orm.em, { ...w.where, migrate: false });
        let ran = false;
        const request = { ...pointsRequest('no-tx'), group: 'points' };
        await expect(
          ledger.transaction(request, () => {
            ran = true;
            return Promise.resolve(null);
          }),
        ).rejects.toThrow(/expected the EntityManager of a MikroORM transaction/);
        expect(ran).toBe(false);
        expect(await w.ledger.get('points', 'no-tx')).toBeUndefined();
      } finally {
        await orm.close();
      }
    });

    it.skipIf(database !== 'PostgreSQL')(
      'answers retry, never ack, when a database error caught inside the handler aborted the MikroORM transaction',
      async () => {
        const pipeline = createPipeline(
          config(async (event, ctx) => {
            credit(ctx.tx, event);
            await ctx.tx.flush();
            await ctx.tx
              .getConnection()
              .execute('SELECT 1/0', [], 'all', ctx.tx.getTransactionContext())
              .catch(() => undefined);
          }),
        );
        const event = payment(9);
        const outcome = await pipeline.process(paymentEnvelope(event));
        expect(outcome.action).toBe('retry');
        expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
        expect(await balances()).toEqual({});
      },
    );

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
          await w.orm.em.insert(w.credits, { eventId: event.eventId, userId: event.userId, amount: 100 });
        }),
        envelopes: paymentEvents(2, 'global').map((event) => paymentEnvelope(event)),
        observe: () => balances(),
      });
      expect(report).toMatchObject({ rolledBack: 2, before: {}, afterRollback: {} });
    });

    it('fails the rollback check, naming the handler, when it writes through a fork of its own', async () => {
      const check = checkRollback<EntityManager, PaymentSucceeded>({
        pipeline: config(async function creditOnAFork(event) {
          await w.orm.em
            .fork()
            .insert(w.credits, { eventId: event.eventId, userId: event.userId, amount: 100 });
        }),
        envelopes: [paymentEnvelope(payment(1))],
        observe: () => balances(),
      });
      await expect(check).rejects.toThrow(RollbackCheckError);
      await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
      await expect(check).rejects.toThrow(/handler 'creditOnAFork' of group 'points' wrote outside/);
    });

    it('shows what that mistake does in production: a commit lost after the handler doubles the escaped effect', async () => {
      let lose = true;
      const flaky = injectCommitFailures(w.ledger, {
        commitFailure: () => {
          const now = lose;
          lose = false;
          return now;
        },
      });
      const pipeline = createPipeline({
        ...config(async (event) => {
          await w.orm.em
            .fork()
            .insert(w.credits, { eventId: event.eventId, userId: event.userId, amount: 100 });
        }),
        ledger: flaky,
      });
      const event = payment(5);
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('retry');
      expect((await pipeline.process(paymentEnvelope(event, 'b-2', 2))).kind).toBe('executed');
      expect(await balances()).toEqual({ [event.userId]: 200 });
    });
  });
}
