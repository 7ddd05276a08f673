import { afterEach, beforeEach } from 'vitest';
import { createOutbox, type Outbox } from 'oncemq';
import {
  prismaBridge,
  prismaLedger,
  type BridgedLedger,
  type PrismaLedgerConfig,
  type SqlBridge,
} from 'oncemq/prisma';
import { mysqlService } from './mysql.js';
import type { PointsWorld } from './points-scenario.js';
import { findPostgres } from './postgres.js';
import {
  prismaMysqlDatabase,
  prismaPostgresSchema,
  type MysqlPrismaTx,
  type PostgresPrismaTx,
  type PrismaNamespace,
} from './prisma.js';

const postgres = await findPostgres();
const mysql = await mysqlService();

/** A payment-to-points world on Prisma: the ledger, the models written through Prisma's transaction client. */
export interface PrismaWorld<Tx> extends PointsWorld<Tx> {
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

/** Opens a world before each test of the calling describe and hands it to `opened`; closes it after the test. */
export function openPrismaWorldEach<Tx>(
  open: () => Promise<PrismaWorld<Tx>>,
  opened: (world: PrismaWorld<Tx>) => void,
): void {
  let world: PrismaWorld<Tx>;
  beforeEach(async () => {
    world = await open();
    opened(world);
  });
  afterEach(async () => {
    await world.close();
  });
}

/** Calls `describeOn` for each database a Prisma pipeline runs on, with whether the machine lacks it. */
export function onEachPrismaDatabase(
  describeOn: <Tx>(name: string, open: () => Promise<PrismaWorld<Tx>>, skip: boolean) => void,
): void {
  describeOn('PostgreSQL through Prisma', openPostgres, !postgres.available);
  describeOn('MariaDB through Prisma', openMysql, !mysql.available);
}
