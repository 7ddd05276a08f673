/**
 * oncemq on Drizzle: `drizzleLedger(db)` is a ledger in the database a Drizzle `db` talks to, whose
 * handler gets a Drizzle object as `ctx.tx` (`ctx.tx.insert(points).values(…)`). On PostgreSQL
 * (node-postgres) and MySQL/MariaDB (mysql2) the claims open `db.transaction()` and `ctx.tx` is its
 * `tx`; `ledger.join(tx)` claims inside a transaction of your own. On better-sqlite3, whose Drizzle
 * transactions are synchronous, the SQLite ledger opens the transaction on `db.$client` and `ctx.tx`
 * is `db` itself. See docs/orm/drizzle.md.
 */
import type { MysqlConnectionLike } from './ledger/mysql/mysql-client.js';
import type { PgClientLike } from './ledger/postgres/postgres-client.js';
import type { SqlBridge } from './ledger/sql-bridge.js';
import type { SqliteDatabaseLike } from './ledger/sqlite/sqlite-database.js';
import { SqliteLedger } from './ledger/sqlite/sqlite-ledger.js';
import {
  drizzleBridge,
  drizzleDatabase,
  type DrizzleLike,
  type DrizzleTransactionLike,
} from './orm/drizzle-bridge.js';
import { drizzleSqliteClient, drizzleSqliteHandle, type DrizzleSqliteLike } from './orm/drizzle-sqlite.js';
import { bridgedLedger, type BridgedLedger, type OrmLedgerConfig } from './orm/orm-ledger.js';
import { refuseServerOptions } from './orm/sqlite-orm-ledger.js';

export { drizzleBridge } from './orm/drizzle-bridge.js';
export type { DrizzleLike, DrizzleQueryableLike, DrizzleTransactionLike } from './orm/drizzle-bridge.js';
export type { DrizzleSqliteLike } from './orm/drizzle-sqlite.js';
export type { BridgedLedger, OrmLedgerConfig } from './orm/orm-ledger.js';
export type { SqlBridge } from './ledger/sql-bridge.js';

/** The SQLite ledger of a Drizzle better-sqlite3 database `Db`: `ctx.tx` is `Db`. */
export type DrizzleSqliteLedger<Db> = SqliteLedger<SqliteDatabaseLike, Db>;

/**
 * A ledger in the SQLite database of a Drizzle better-sqlite3 `db`: each transactional claim runs
 * `BEGIN IMMEDIATE` on `db.$client` and hands `db` to the handler as `ctx.tx`, so the handler's
 * writes through it commit with the claim.
 */
export function drizzleLedger<Db extends DrizzleSqliteLike>(
  db: Db,
  config?: OrmLedgerConfig,
): DrizzleSqliteLedger<Db>;
/**
 * A ledger in the database a Drizzle node-postgres or mysql2 `db` talks to, whose transactional
 * claims open their transaction with `db.transaction()`: the claim, the handler's writes through
 * `ctx.tx` (the `tx`) and the completion commit together.
 */
export function drizzleLedger<Tx extends DrizzleTransactionLike>(
  db: DrizzleLike<Tx>,
  config?: OrmLedgerConfig,
): BridgedLedger<Tx>;
export function drizzleLedger(
  db: DrizzleSqliteLike | DrizzleLike,
  config: OrmLedgerConfig = {},
): DrizzleSqliteLedger<DrizzleSqliteLike> | BridgedLedger<DrizzleTransactionLike> {
  if (drizzleDatabase(db) !== 'sqlite') {
    const bridge:
      | SqlBridge<PgClientLike, DrizzleTransactionLike>
      | SqlBridge<MysqlConnectionLike, DrizzleTransactionLike> = drizzleBridge(db as DrizzleLike);
    return bridgedLedger(bridge, config);
  }
  refuseServerOptions(config);
  const sqlite = db as DrizzleSqliteLike;
  return new SqliteLedger<SqliteDatabaseLike, DrizzleSqliteLike>({
    ...config,
    database: drizzleSqliteClient(sqlite),
    handle: drizzleSqliteHandle(sqlite),
  });
}
