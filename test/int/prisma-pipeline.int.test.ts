import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  LedgerUnavailableError,
  createOutbox,
  createPipeline,
  createRelay,
  type Outbox,
  type OutgoingMessage,
  type PipelineConfig,
} from 'oncemq';
import {
  prismaBridge,
  prismaLedger,
  type BridgedLedger,
  type PrismaLedgerConfig,
  type SqlBridge,
} from 'oncemq/prisma';
import { checkRollback, RollbackCheckError } from 'oncemq/testing';
import { mysqlService } from '../support/mysql.js';
import {
  payment,
  paymentEnvelope,
  paymentEvents,
  pointsRequest,
  sleep,
  type PaymentSucceeded,
} from '../support/points.js';
import { describePaymentToPoints, type PointsWorld } from '../support/points-scenario.js';
import { findPostgres } from '../support/postgres.js';
import {
  prismaMysqlDatabase,
  prismaPostgresSchema,
  type MysqlPrismaTx,
  type PostgresPrismaTx,
  type PrismaNamespace,
} from '../support/prisma.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** A payment-to-points world on Prisma: the ledger, the models written through Prisma's transaction client. */
interface PrismaWorld<Tx> extends PointsWorld<Tx> {
  readonly ledger: BridgedLedger<Tx>;
  readonly namespace: PrismaNamespace<unknown>;
  /** The PrismaClient itself, where a transaction client is expected. */
  readonly client: Tx;
  /** A transaction of the application's own: `prisma.$transaction(work)`. */
  appTransaction<T>(work: (trx: Tx) => Promise<T>): Promise<T>;
  recordPayment(trx: Tx, id: string, userId: string): Promise<unknown>;
  payments(): Promise<number>;
  /** The isolation level the transaction `tx` runs in, as the database names it. */
  isolation(tx: Tx): Promise<string>;
  /** Another initialized ledger on the same table, through a client of its own. */
  ledgerWith(
    config: PrismaLedgerConfig,
    client?: { transactionOptions?: { timeout?: number } },
  ): Promise<BridgedLedger<Tx>>;
  /** The outbox of the ledger's database, its tables created through the bridge it answers too. */
  outbox(): Promise<{ outbox: Outbox<Tx>; bridge: SqlBridge<unknown, unknown> }>;
  /** The balances of every user, read with the driver. */
  balances(): Promise<Record<string, number>>;
  outboxRows(): Promise<number>;
}

async function openPostgres(): Promise<PrismaWorld<PostgresPrismaTx>> {
  const namespace = await prismaPostgresSchema(postgres.url);
  const schema = namespace.name;
  const prisma = namespace.client();
  const ledger = prismaLedger(prisma, { schema });
  await ledger.init();
  const count = async (table: string): Promise<number> =>
    Number((await namespace.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM "${schema}".${table}`))[0]?.n);
  return {
    ledger,
    namespace,
    client: prisma,
    addPoints: (tx, userId, amount) =>
      tx.point.upsert({
        where: { userId },
        create: { userId, balance: amount },
        update: { balance: { increment: amount } },
      }),
    balance: async (userId) => (await prisma.point.findUnique({ where: { userId } }))?.balance ?? 0,
    ledgerRows: () => count('oncemq_ledger'),
    appTransaction: (work) => prisma.$transaction(work),
    recordPayment: (trx, id, userId) => trx.payment.create({ data: { id, userId, amount: 100 } }),
    payments: () => prisma.payment.count(),
    isolation: async (tx) =>
      (
        await tx.$queryRawUnsafe<{ level: string }[]>(
          "SELECT current_setting('transaction_isolation') AS level",
        )
      )[0]?.level ?? '',
    ledgerWith: async (config, client) => {
      const other = prismaLedger(namespace.client(client), { schema, migrate: false, ...config });
      await other.init();
      return other;
    },
    outbox: async () => {
      const outbox = createOutbox({ ledger, schema });
      const bridge = prismaBridge(prisma) as SqlBridge<unknown, unknown>;
      await outbox.migrate(bridge);
      return { outbox, bridge };
    },
    balances: async () =>
      Object.fromEntries(
        (
          await namespace.query<{ user_id: string; balance: number }>(
            `SELECT user_id, balance FROM "${schema}".points ORDER BY user_id`,
          )
        ).map((row) => [row.user_id, row.balance]),
      ),
    outboxRows: () => count('oncemq_outbox'),
    close: () => namespace.drop(),
  };
}

async function openMysql(): Promise<PrismaWorld<MysqlPrismaTx>> {
  const namespace = await prismaMysqlDatabase(mysql.url);
  const prisma = namespace.client();
  const ledger = prismaLedger(prisma);
  await ledger.init();
  const count = async (table: string): Promise<number> =>
    Number((await namespace.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM ${table}`))[0]?.n);
  return {
    ledger,
    namespace,
    client: prisma,
    addPoints: (tx, userId, amount) =>
      tx.point.upsert({
        where: { userId },
        create: { userId, balance: amount },
        update: { balance: { increment: amount } },
      }),
    balance: async (userId) => (await prisma.point.findUnique({ where: { userId } }))?.balance ?? 0,
    ledgerRows: () => count('oncemq_ledger'),
    appTransaction: (work) => prisma.$transaction(work),
    recordPayment: (trx, id, userId) => trx.payment.create({ data: { id, userId, amount: 100 } }),
    payments: () => prisma.payment.count(),
    isolation: () => Promise.resolve('(not observable on MariaDB)'),
    ledgerWith: async (config, client) => {
      const other = prismaLedger(namespace.client(client), { migrate: false, ...config });
      await other.init();
      return other;
    },
    outbox: async () => {
      const outbox = createOutbox({ ledger });
      const bridge = prismaBridge(prisma) as SqlBridge<unknown, unknown>;
      await outbox.migrate(bridge);
      return { outbox, bridge };
    },
    balances: async () =>
      Object.fromEntries(
        (
          await namespace.query<{ user_id: string; balance: number }>(
            'SELECT user_id, balance FROM points ORDER BY user_id',
          )
        ).map((row) => [row.user_id, row.balance]),
      ),
    outboxRows: () => count('oncemq_outbox'),
    close: () => namespace.drop(),
  };
}

const event = payment(1);

function describePrismaPipeline<Tx>(name: string, open: () => Promise<PrismaWorld<Tx>>, skip: boolean): void {
  describePaymentToPoints(name, open, { skip });

  describe.skipIf(skip)(`a Prisma pipeline on ${name}`, () => {
    let world: PrismaWorld<Tx>;

    beforeEach(async () => {
      world = await open();
    });

    afterEach(async () => {
      await world.close();
    });

    const points = (
      ledger: BridgedLedger<Tx>,
      handler?: (message: PaymentSucceeded, tx: Tx) => Promise<void>,
    ) =>
      createPipeline<Tx, PaymentSucceeded>({
        ledger,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          await (handler ?? ((m, tx) => world.addPoints(tx, m.userId, 100)))(message, ctx.tx);
        },
      });

    /** The first claims on a new client compile Prisma's query plans: run one through before timing any. */
    const warmUp = async (ledger: BridgedLedger<Tx>): Promise<void> => {
      const warm = payment(99);
      for (let attempt = 1; attempt <= 5; attempt++) {
        const outcome = await points(ledger).process(
          paymentEnvelope(warm, `broker-${warm.eventId}`, attempt),
        );
        if (outcome.kind === 'executed') return;
      }
      throw new Error('the warm-up delivery never executed');
    };

    it('claims inside the application’s own Prisma transaction with join(trx): the claim, its work and the application’s write commit together', async () => {
      const request = pointsRequest('order-1');
      await world.appTransaction(async (trx) => {
        await world.recordPayment(trx, 'pay-1', 'alice');
        const claimed = await world.ledger.join(trx).transaction(request, async (tx) => {
          expect(tx).toBe(trx);
          await world.addPoints(tx, 'alice', 100);
          return null;
        });
        expect(claimed.status).toBe('acquired');
      });
      expect(await world.payments()).toBe(1);
      expect(await world.balance('alice')).toBe(100);
      expect(await world.ledger.get('points', 'order-1')).toMatchObject({ status: 'SUCCESS' });
      // the same key claimed again in another application transaction is a duplicate, its work not run
      await world.appTransaction(async (trx) => {
        const again = await world.ledger.join(trx).transaction(request, () => {
          throw new Error('must not run');
        });
        expect(again.status).toBe('duplicate');
      });
      expect(await world.balance('alice')).toBe(100);
    });

    it('rolls the joined claim back with the application’s transaction, and the key can be claimed again', async () => {
      const request = pointsRequest('order-2');
      await expect(
        world.appTransaction(async (trx) => {
          await world.recordPayment(trx, 'pay-2', 'bob');
          const claimed = await world.ledger.join(trx).transaction(request, async (tx) => {
            await world.addPoints(tx, 'bob', 100);
            return null;
          });
          expect(claimed.status).toBe('acquired');
          throw new Error('the application changed its mind');
        }),
      ).rejects.toThrow('the application changed its mind');
      expect(await world.payments()).toBe(0);
      expect(await world.balance('bob')).toBe(0);
      expect(await world.ledger.get('points', 'order-2')).toBeUndefined();
      const retried = await world.ledger.transaction(request, async (tx) => {
        await world.addPoints(tx, 'bob', 100);
        return null;
      });
      expect(retried.status).toBe('acquired');
      expect(await world.balance('bob')).toBe(100);
    });

    it('writes to the outbox with add(trx) only when the Prisma transaction commits, and from a handler with ctx.outbox; the relay publishes them', async () => {
      const { outbox, bridge } = await world.outbox();
      await world.appTransaction((trx) => outbox.add(trx, { topic: 'points', key: 'k-1', body: { n: 1 } }));
      expect(await world.outboxRows()).toBe(1);
      await expect(
        world.appTransaction(async (trx) => {
          await outbox.add(trx, { topic: 'points', key: 'k-2', body: { n: 2 } });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await world.outboxRows()).toBe(1);
      const pipeline = createPipeline<Tx, PaymentSucceeded>({
        ledger: world.ledger,
        outbox,
        group: 'points',
        key: { jsonPath: 'eventId' },
        handler: async (message, ctx) => {
          await world.addPoints(ctx.tx, message.userId, 100);
          await ctx.outbox.add({ topic: 'points-added', key: message.eventId, body: message });
        },
      });
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('executed');
      expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('duplicate');
      expect(await world.outboxRows()).toBe(2);
      const published: OutgoingMessage[] = [];
      const transport = {
        name: 'memory',
        publish: (message: OutgoingMessage) => {
          published.push(message);
          return Promise.resolve({ brokerId: `m-${published.length}`, topic: message.topic });
        },
      };
      const relay = createRelay({ outbox, transport, database: bridge });
      expect(await relay.runOnce()).toEqual({ claimed: 2, published: 2, failed: 0 });
      expect(published.map((m) => m.key).sort()).toEqual(['evt-1', 'k-1']);
      await relay.stop();
    });

    it('refuses the PrismaClient where a transaction client is required: join, outbox.add and the dialect', async () => {
      const { outbox } = await world.outbox();
      expect(() => world.ledger.join(world.client)).toThrow(ConfigError);
      expect(() => world.ledger.join(world.client)).toThrow(/expected a Prisma transaction client/);
      await expect(outbox.add(world.client, { topic: 'points', key: 'k', body: 'x' })).rejects.toThrow(
        ConfigError,
      );
      expect(() => world.ledger.dialect.query(world.client, 'SELECT 1', [])).toThrow(ConfigError);
      expect(await world.outboxRows()).toBe(0);
    });

    it('rolls back and retries, never acks, a claim whose handler finishes past the timeout, whether or not it writes again; the redelivery applies it once', async () => {
      const short = await world.ledgerWith({ transactionOptions: { timeout: 500 } });
      const late = points(short, async (message, tx) => {
        await world.addPoints(tx, message.userId, 100);
        await sleep(600);
      });
      await warmUp(short);
      const first = await late.process(paymentEnvelope(event));
      expect(first.kind).toBe('retry');
      const error = (first as { error?: unknown }).error;
      expect(error).toBeInstanceOf(LedgerUnavailableError);
      expect((error as Error).message).toMatch(/past transactionOptions\.timeout \(500ms\)/);
      const writing = points(short, async (message, tx) => {
        await world.addPoints(tx, message.userId, 100);
        await sleep(600);
        await world.addPoints(tx, message.userId, 100);
      });
      const second = await writing.process(paymentEnvelope(event, `broker-${event.eventId}`, 2));
      expect(second.kind).toBe('retry');
      expect(await world.balance(event.userId)).toBe(0);
      expect((await short.get('points', event.eventId))?.status).not.toBe('SUCCESS');
      const quick = await points(short).process(paymentEnvelope(event, `broker-${event.eventId}`, 3));
      expect(quick.kind).toBe('executed');
      expect(await world.balance(event.userId)).toBe(100);
      expect(await world.ledgerRows()).toBe(2); // the first claim and this key
    });

    it('leaves a handler that does not return to Prisma’s own timeout, twice the claim’s: a retry, nothing applied', async () => {
      const short = await world.ledgerWith({ transactionOptions: { timeout: 200 } });
      const stuck = points(short, async (message, tx) => {
        await world.addPoints(tx, message.userId, 100);
        await sleep(700);
      });
      const outcome = await stuck.process(paymentEnvelope(event));
      expect(outcome.kind).toBe('retry');
      expect(((outcome as { error?: unknown }).error as Error).message).toMatch(
        /timeout for this transaction was 400 ms/,
      );
      expect(await world.balance(event.userId)).toBe(0);
    });

    it('rolls back a Prisma write that was still running at the timeout with the rest of the claim: none of it escapes', async () => {
      // Prisma's own timeout does not wait for an operation in flight: on MariaDB an upsert (a read,
      // then a write) held up by a lock across it would write after Prisma's rollback, outside the
      // transaction. The claim's deadline is oncemq's, checked once the handler has returned.
      const short = await world.ledgerWith({
        transactionOptions: { timeout: 400, isolationLevel: 'Serializable' },
      });
      await warmUp(short);
      await world.appTransaction(async (trx) => {
        await world.addPoints(trx, event.userId, 5);
      });
      const release = await world.namespace.lockPoints(event.userId);
      const processing = points(short).process(paymentEnvelope(event));
      await sleep(600);
      await release();
      const outcome = await processing;
      expect(outcome.kind).toBe('retry');
      expect(await world.balance(event.userId)).toBe(5);
      expect(await short.get('points', event.eventId)).toBeUndefined();
    });

    it('gives claims its own timeout (30s by default), not the client’s', async () => {
      const ledger = await world.ledgerWith({}, { transactionOptions: { timeout: 200 } });
      const slow = points(ledger, async (message, tx) => {
        await sleep(500);
        await world.addPoints(tx, message.userId, 100);
      });
      expect((await slow.process(paymentEnvelope(event))).kind).toBe('executed');
      expect(await world.balance(event.userId)).toBe(100);
    });

    it.skipIf(name !== 'PostgreSQL through Prisma')(
      'runs claims at the configured isolation level',
      async () => {
        const ledger = await world.ledgerWith({ transactionOptions: { isolationLevel: 'Serializable' } });
        const seen: string[] = [];
        const pipeline = points(ledger, async (message, tx) => {
          seen.push(await world.isolation(tx));
          await world.addPoints(tx, message.userId, 100);
        });
        expect((await pipeline.process(paymentEnvelope(event))).kind).toBe('executed');
        expect(seen).toEqual(['serializable']);
      },
    );

    it.skipIf(name !== 'PostgreSQL through Prisma')(
      'answers retry, never ack, when a database error caught inside the handler aborted the Prisma transaction',
      async () => {
        const pipeline = points(world.ledger, async (message, tx) => {
          await world.addPoints(tx, message.userId, 100);
          await (tx as PostgresPrismaTx).$queryRawUnsafe('SELECT 1/0').catch(() => undefined);
        });
        const outcome = await pipeline.process(paymentEnvelope(event));
        expect(outcome.action).toBe('retry');
        expect(await world.ledger.get('points', event.eventId)).toBeUndefined();
        expect(await world.balances()).toEqual({});
      },
    );

    it('keeps the maintenance lock past the transaction timeout, on a connection Prisma does not take back', async () => {
      const short = await world.ledgerWith({ transactionOptions: { timeout: 300 } });
      const other = await world.ledgerWith({ transactionOptions: { timeout: 300 } });
      const lock = await short.tryMaintenanceLock();
      expect(lock).toBeDefined();
      await sleep(800);
      expect(await other.tryMaintenanceLock()).toBeUndefined();
      await lock?.release();
      const next = await other.tryMaintenanceLock();
      expect(next).toBeDefined();
      await next?.release();
    });

    const config = (
      handler: NonNullable<PipelineConfig<Tx, PaymentSucceeded>['handler']>,
    ): PipelineConfig<Tx, PaymentSucceeded> => ({
      ledger: world.ledger,
      group: 'points',
      key: { jsonPath: 'eventId' },
      handler,
    });

    it('passes the rollback check when the handler writes with ctx.tx', async () => {
      const report = await checkRollback<Tx, PaymentSucceeded>({
        pipeline: config(async function addPointsInTheClaim(message, ctx) {
          await world.addPoints(ctx.tx, message.userId, 100);
        }),
        envelopes: paymentEvents(3, 'ok').map((e) => paymentEnvelope(e)),
        observe: () => world.balances(),
      });
      expect(report).toMatchObject({ rolledBack: 3, before: {}, afterRollback: {} });
      expect(report.afterCommit).toEqual({ 'user-0': 100, 'user-1': 100, 'user-2': 100 });
    });

    it('fails the rollback check, naming the handler, when it writes with the PrismaClient instead of ctx.tx', async () => {
      const check = checkRollback<Tx, PaymentSucceeded>({
        pipeline: config(async function addPointsOnThePrismaClient(message) {
          await world.addPoints(world.client, message.userId, 100);
        }),
        envelopes: [paymentEnvelope(event)],
        observe: () => world.balances(),
      });
      await expect(check).rejects.toThrow(RollbackCheckError);
      await expect(check).rejects.toMatchObject({ reason: 'effect-escaped' });
      await expect(check).rejects.toThrow(
        /handler 'addPointsOnThePrismaClient' of group 'points' wrote outside/,
      );
    });
  });
}

describePrismaPipeline('PostgreSQL through Prisma', openPostgres, !postgres.available);
describePrismaPipeline('MariaDB through Prisma', openMysql, !mysql.available);
