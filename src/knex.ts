/**
 * oncemq on Knex: `knexLedger(knex)` is a PostgreSQL, MySQL/MariaDB or SQLite (better-sqlite3) ledger
 * whose transactions Knex opens, so the handler's `ctx.tx` is a Knex transaction
 * (`ctx.tx('points').insert(…)`), and `ledger.join(trx)` claims inside a transaction of your own. See
 * docs/orm/knex.md.
 */
import type { SqlBridge } from './ledger/sql-bridge.js';
import type { MysqlConnectionLike } from './ledger/mysql/mysql-client.js';
import type { PgClientLike } from './ledger/postgres/postgres-client.js';
import { knexBridge, type KnexLike, type KnexTransactionLike } from './orm/knex-bridge.js';
import { isKnexSqlite, knexSqlite } from './orm/knex-sqlite.js';
import { bridgedLedger, type BridgedLedger, type OrmLedgerConfig } from './orm/orm-ledger.js';
import { sqliteOrmLedger } from './orm/sqlite-orm-ledger.js';

export { knexBridge } from './orm/knex-bridge.js';
export type {
  KnexBridgeOptions,
  KnexLike,
  KnexQueryableLike,
  KnexQueryEventLike,
  KnexTransactionLike,
} from './orm/knex-bridge.js';
export type { BridgedLedger, OrmLedgerConfig } from './orm/orm-ledger.js';
export type { SqlBridge } from './ledger/sql-bridge.js';

/**
 * A ledger in the database `knex` talks to (pg, mysql2 or better-sqlite3), whose transactional claims
 * open their transaction with `knex.transaction()`: the claim, the handler's writes through `ctx.tx`
 * (the `trx`) and the completion commit together. On better-sqlite3 it is the SQLite ledger on the
 * connection of Knex's pool, which it borrows from the pool for every operation.
 */
export function knexLedger<Tx extends KnexTransactionLike>(
  knex: KnexLike<Tx>,
  config: OrmLedgerConfig = {},
): BridgedLedger<Tx> {
  if (isKnexSqlite(knex)) return sqliteOrmLedger(knexSqlite(knex), config);
  const bridge: SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> = knexBridge(knex, {
    logger: config.logger,
  });
  return bridgedLedger(bridge, config);
}
