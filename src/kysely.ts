/**
 * oncemq on Kysely: `kyselyLedger(db)` is a PostgreSQL or MySQL/MariaDB ledger whose transactions
 * Kysely opens, so the handler's `ctx.tx` is a Kysely `Transaction<DB>`
 * (`ctx.tx.insertInto('points').values(…)`), and `ledger.join(trx)` claims inside a transaction of
 * your own. See docs/orm/kysely.md.
 */
import type { SqlBridge } from './ledger/sql-bridge.js';
import type { MysqlConnectionLike } from './ledger/mysql/mysql-client.js';
import type { PgClientLike } from './ledger/postgres/postgres-client.js';
import { kyselyBridge, type KyselyLike, type KyselyTransactionLike } from './orm/kysely-bridge.js';
import { bridgedLedger, type BridgedLedger, type OrmLedgerConfig } from './orm/orm-ledger.js';

export { kyselyBridge } from './orm/kysely-bridge.js';
export type {
  KyselyLike,
  KyselyQueryableLike,
  KyselyQueryResultLike,
  KyselyTransactionLike,
} from './orm/kysely-bridge.js';
export type { BridgedLedger, OrmLedgerConfig } from './orm/orm-ledger.js';
export type { SqlBridge } from './ledger/sql-bridge.js';

/**
 * A ledger in the database `db` talks to (PostgresDialect or MysqlDialect), whose transactional
 * claims open their transaction with `db.transaction().execute()`: the claim, the handler's writes
 * through `ctx.tx` (the `trx`) and the completion commit together.
 */
export function kyselyLedger<Tx extends KyselyTransactionLike>(
  db: KyselyLike<Tx>,
  config: OrmLedgerConfig = {},
): BridgedLedger<Tx> {
  const bridge: SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> = kyselyBridge(db);
  return bridgedLedger(bridge, config);
}
