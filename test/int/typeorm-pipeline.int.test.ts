import { DataSource, EntitySchema, type EntityManager } from 'typeorm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  createOutbox,
  createPipeline,
  createRelay,
  type OutgoingMessage,
  type PipelineConfig,
} from 'oncemq';
import { checkRollback, injectCommitFailures, RollbackCheckError } from 'oncemq/testing';
import { typeormBridge, typeormLedger, type BridgedLedger } from 'oncemq/typeorm';
import { mysqlService, uniqueTable } from '../support/mysql.js';
import { findPostgres, scratchSchema } from '../support/postgres.js';
import { payment, paymentEnvelope, paymentEvents, type PaymentSucceeded } from '../support/points.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** One credit of points per applied event: a row per effect, so an effect applied twice shows. */
interface Credit {
  id?: number;
  eventId: string;
  userId: string;
  amount: number;
}

function creditEntity(tableName: string, schema?: string): EntitySchema<Credit> {
  // TypeORM declares EntitySchema's options as a class; an object literal is how its docs give them
  // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
  return new EntitySchema<Credit>({
    name: 'Credit',
    tableName,
    schema,
    columns: {
      id: { type: Number, primary: true, generated: 'increment' },
      eventId: { type: String, name: 'event_id' },
      userId: { type: String, name: 'user_id' },
      amount: { type: Number },
    },
  });
}

interface World {
  readonly dataSource: DataSource;
  readonly credits: EntitySchema<Credit>;
  readonly ledger: BridgedLedger<EntityManager>;
  /** Where this world's outbox lives. */
  readonly outbox: { readonly table: string; readonly schema?: string };
  /** The qualified, quoted outbox table. */
  readonly outboxTable: string;
  readonly close: () => Promise<void>;
}

async function postgresWorld(): Promise<World> {
  const schema = scratchSchema('oncemq_typeormp');
  const credits = creditEntity('credits', schema);
  const dataSource = await new DataSource({
    type: 'postgres',
    url: postgres.url,
    poolSize: 6,
    entities: [credits],
  }).initialize();
  await dataSource.query(`CREATE SCHEMA "${schema}"`);
  await dataSource.query(
    `CREATE TABLE "${schema}".credits (id serial PRIMARY KEY, event_id text NOT NULL, user_id text NOT NULL, amount int NOT NULL)`,
  );
  return {
    dataSource,
    credits,
    ledger: typeormLedger(dataSource, { schema }),
    outbox: { table: 'oncemq_outbox', schema },
    outboxTable: `"${schema}".oncemq_outbox`,
    close: async () => {
      await dataSource.query(`DROP SCHEMA "${schema}" CASCADE`);
    },
  };
}

async function mysqlWorld(): Promise<World> {
  const table = uniqueTable('typeormp');
  const credits = creditEntity(`${table}_credits`);
  const dataSource = await new DataSource({
    type: 'mysql',
    url: mysql.url,
    poolSize: 6,
    entities: [credits],
  }).initialize();
  await dataSource.query(
    `CREATE TABLE \`${table}_credits\` (id INT AUTO_INCREMENT PRIMARY KEY, event_id VARCHAR(64) NOT NULL, user_id VARCHAR(64) NOT NULL, amount INT NOT NULL)`,
  );
  return {
    dataSource,
    credits,
    ledger: typeormLedger(dataSource, { table }),
    outbox: { table: `${table}_ob` },
    outboxTable: `\`${table}_ob\``,
    close: async () => {
      for (const name of [`${table}_credits`, table, `${table}_schema`, `${table}_ob`, `${table}_ob_keys`]) {
        await dataSource.query(`DROP TABLE IF EXISTS \`${name}\``);
      }
    },
  };
}

for (const [database, open, available] of [
  ['PostgreSQL', postgresWorld, postgres.available],
  ['MariaDB', mysqlWorld, mysql.available],
] as const) {
  describe.skipIf(!available)(`a pipeline on TypeORM (${database})`, () => {
    let w: World;
    beforeEach(async () => {
      w = await open();
      await w.ledger.init();
    });
    afterEach(async () => {
      await w.ledger.close();
      await w.close();
      await w.dataSource.destroy();
    });

    /** Credits the payment's points through `manager`: the claim's transaction when it is ctx.tx. */
    const credit = (manager: EntityManager, event: PaymentSucceeded) =>
      manager.getRepository(w.credits).insert({
        eventId: event.eventId,
        userId: event.userId,
        amount: event.amount,
      });

    /** Points per user, read outside any claim. */
    const balances = async (): Promise<Record<string, number>> => {
      const rows: { userId: string; total: string | number }[] = await w.dataSource
        .getRepository(w.credits)
        .createQueryBuilder('c')
        .select('c.userId', 'userId')
        .addSelect('SUM(c.amount)', 'total')
        .groupBy('c.userId')
        .orderBy('c.userId')
        .getRawMany();
      return Object.fromEntries(rows.map((r) => [r.userId, Number(r.total)]));
    };

    const config = (
      handler: PipelineConfig<EntityManager, PaymentSucceeded>['handler'],
    ): PipelineConfig<EntityManager, PaymentSucceeded> => ({
      ledger: w.ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler,
    });

    it('hands the handler the EntityManager of a TypeORM transaction and applies each event once however many copies arrive', async () => {
      const seen: boolean[] = [];
      const pipeline = createPipeline(
        config(async (event, ctx) => {
          seen.push(ctx.tx.queryRunner?.isTransactionActive === true);
          await credit(ctx.tx, event);
        }),
      );
      const events = paymentEvents(20);
      const copies = [...events, ...events, ...events].map((event, i) => paymentEnvelope(event, `b-${i}`));
      const outcomes = await Promise.all(copies.map((envelope) => pipeline.process(envelope)));
      expect(outcomes.filter((o) => o.kind === 'executed')).toHaveLength(20);
      expect(outcomes.filter((o) => o.action !== 'ack')).toHaveLength(0);
      expect(seen).toHaveLength(20);
      expect(seen.every(Boolean)).toBe(true);
      expect(await w.dataSource.getRepository(w.credits).count()).toBe(20);
      const total = Object.values(await balances()).reduce((a, b) => a + b, 0);
      expect(total).toBe(20 * 100);
    });

    it('rolls back the write of a handler that throws after it, and the redelivery applies it once', async () => {
      let fail = true;
      const pipeline = createPipeline(
        config(async (event, ctx) => {
          await credit(ctx.tx, event);
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

    it('claims inside a TypeORM transaction of the application, which commits or rolls back the claim with its own writes', async () => {
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
        w.dataSource.transaction(async (manager) => {
          const result = await w.ledger.join(manager).transaction(request, async (tx) => {
            expect(tx).toBe(manager);
            await credit(tx, event);
            return null;
          });
          expect(result.status).toBe('acquired');
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      expect(await w.ledger.get('points', event.eventId)).toBeUndefined();
      expect(await balances()).toEqual({});

      await w.dataSource.transaction(async (manager) => {
        await w.ledger.join(manager).transaction(request, async (tx) => {
          await credit(tx, event);
          return null;
        });
      });
      expect((await w.ledger.get('points', event.eventId))?.status).toBe('SUCCESS');
      const again = await w.dataSource.transaction((manager) =>
        w.ledger.join(manager).transaction(request, () => null),
      );
      expect(again.status).toBe('duplicate');
      expect(await balances()).toEqual({ [event.userId]: 100 });
    });

    it('writes outbox messages in the TypeORM transaction, relays them through the data source, and refuses a manager outside a transaction', async () => {
      const outbox = createOutbox({ ledger: w.ledger, ...w.outbox });
      const bridge = typeormBridge(w.dataSource);
      await outbox.migrate(bridge);
      const pending = async (): Promise<string[]> => {
        const rows: { business_key: string }[] = await w.dataSource.query(
          `SELECT business_key FROM ${w.outboxTable} WHERE sent_at IS NULL ORDER BY id`,
        );
        return rows.map((r) => r.business_key);
      };
      await expect(
        w.dataSource.transaction(async (manager) => {
          await outbox.add(manager, { topic: 'points-added', key: 'rolled-back', body: { n: 1 } });
          throw new Error('the application rolls back');
        }),
      ).rejects.toThrow('the application rolls back');
      let ended: EntityManager | undefined;
      await w.dataSource.transaction(async (manager) => {
        ended = manager;
        await outbox.add(manager, { topic: 'points-added', key: 'committed', body: { n: 2 } });
      });
      expect(await pending()).toEqual(['committed']);

      const bare = w.dataSource.manager;
      expect(() => w.ledger.join(bare)).toThrow(ConfigError);
      await expect(outbox.add(bare, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
        /expected the EntityManager of a TypeORM transaction/,
      );
      await expect(outbox.add(ended as EntityManager, { topic: 't', key: 'k', body: {} })).rejects.toThrow(
        ConfigError,
      );
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

    it.skipIf(database !== 'PostgreSQL')(
      'answers retry, never ack, when a database error caught inside the handler aborted the TypeORM transaction',
      async () => {
        const pipeline = createPipeline(
          config(async (event, ctx) => {
            await credit(ctx.tx, event);
            await ctx.tx.query('SELECT 1/0').catch(() => undefined);
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
        pipeline: config(async function creditInTheClaim(event, ctx) {
          await credit(ctx.tx, event);
        }),
        envelopes: paymentEvents(3, 'ok').map((event) => paymentEnvelope(event)),
        observe: () => balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).toEqual({ 'user-0': 100, 'user-1': 100, 'user-2': 100 });
    });

    it('fails the rollback check, naming the handler, when it writes through the data source’s own manager', async () => {
      const check = checkRollback<EntityManager, PaymentSucceeded>({
        pipeline: config(async function creditOnTheAppManager(event) {
          await credit(w.dataSource.manager, event);
        }),
        envelopes: [paymentEnvelope(payment(1))],
        observe: () => balances(),
      });
      await expect(check).rejects.toThrow(RollbackCheckError);
      await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
      await expect(check).rejects.toThrow(/handler 'creditOnTheAppManager' of group 'points' wrote outside/);
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
          await credit(w.dataSource.manager, event);
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
