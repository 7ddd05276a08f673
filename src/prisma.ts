/**
 * oncemq on Prisma: `prismaLedger(prisma)` is a PostgreSQL or MySQL/MariaDB ledger whose transactions
 * Prisma opens (`prisma.$transaction(async (tx) => …)`), so the handler's `ctx.tx` is Prisma's
 * transaction client (`ctx.tx.point.upsert(…)`), and `ledger.join(tx)` claims inside an interactive
 * transaction of your own. See docs/orm/prisma.md.
 */
import type { SqlBridge } from './ledger/sql-bridge.js';
import type { MysqlConnectionLike } from './ledger/mysql/mysql-client.js';
import type { PgClientLike } from './ledger/postgres/postgres-client.js';
import { bridgedLedger, type BridgedLedger, type OrmLedgerConfig } from './orm/orm-ledger.js';
import {
  prismaBridge,
  type PrismaBridgeConfig,
  type PrismaClientLike,
  type PrismaQueryableLike,
} from './orm/prisma-bridge.js';

export { DEFAULT_PRISMA_TRANSACTION_OPTIONS, prismaBridge } from './orm/prisma-bridge.js';
export type {
  PrismaBridgeConfig,
  PrismaClientLike,
  PrismaIsolationLevel,
  PrismaQueryableLike,
  PrismaTransactionOptions,
  PrismaTransactionOptionsLike,
} from './orm/prisma-bridge.js';
export type { BridgedLedger, OrmLedgerConfig } from './orm/orm-ledger.js';
export type { SqlBridge } from './ledger/sql-bridge.js';

/** Configuration of {@link prismaLedger}: the ledger's, and the transactions Prisma opens for it. */
export interface PrismaLedgerConfig extends OrmLedgerConfig, PrismaBridgeConfig {}

/**
 * A ledger in the database `prisma` talks to (PostgreSQL through `@prisma/adapter-pg`, MySQL/MariaDB
 * through `@prisma/adapter-mariadb`), whose transactional claims open an interactive transaction with
 * `prisma.$transaction()`: the claim, the handler's writes through `ctx.tx` (Prisma's transaction
 * client) and the completion commit together.
 */
export function prismaLedger<Tx extends PrismaQueryableLike>(
  prisma: PrismaClientLike<Tx>,
  config: PrismaLedgerConfig = {},
): BridgedLedger<Tx> {
  const { transactionOptions, provider, ...ledger } = config;
  const bridge: SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> = prismaBridge(prisma, {
    transactionOptions,
    provider,
  });
  return bridgedLedger(bridge, ledger);
}
