/**
 * oncemq on Kysely: `kyselyLedger(db)` is a PostgreSQL or MySQL/MariaDB ledger, and
 * `kyselyLedger(db, { database })` a SQLite one (better-sqlite3), whose transactions Kysely opens, so
 * the handler's `ctx.tx` is a Kysely `Transaction<DB>` (`ctx.tx.insertInto('points').values(…)`), and
 * `ledger.join(trx)` claims inside a transaction of your own. See docs/orm/kysely.md.
 */
import type { SqlBridge } from './ledger/sql-bridge.js';
import type { MysqlConnectionLike } from './ledger/mysql/mysql-client.js';
import type { PgClientLike } from './ledger/postgres/postgres-client.js';
import { isSqliteDatabase } from './ledger/sqlite/sqlite-database.js';
import { kyselyBridge, type KyselyLike, type KyselyTransactionLike } from './orm/kysely-bridge.js';
import {
  checkKyselySqlite,
  kyselySqlite,
  writesSqlite,
  type KyselySqliteLedgerConfig,
} from './orm/kysely-sqlite.js';
import { bridgedLedger, type BridgedLedger, type OrmLedgerConfig } from './orm/orm-ledger.js';
import { sqliteOrmLedger } from './orm/sqlite-orm-ledger.js';

export { kyselyBridge } from './orm/kysely-bridge.js';
export type {
  KyselyLike,
  KyselyQueryableLike,
  KyselyQueryResultLike,
  KyselyTransactionLike,
} from './orm/kysely-bridge.js';
export type { KyselySqliteLedgerConfig } from './orm/kysely-sqlite.js';
export type { BridgedLedger, OrmLedgerConfig } from './orm/orm-ledger.js';
export type { SqlBridge } from './ledger/sql-bridge.js';

/**
 * A ledger in the SQLite database of a Kysely instance with `SqliteDialect`: `config.database` is the
 * better-sqlite3 `Database` given to the dialect. Each transactional claim is one
 * `db.transaction().execute()`, the ledger's statements run on `database` inside it, and the handler's
 * writes through `ctx.tx` (the `trx`) commit with the claim.
 */
export function kyselyLedger<Tx extends KyselyTransactionLike>(
  db: KyselyLike<Tx>,
  config: KyselySqliteLedgerConfig,
): BridgedLedger<Tx>;
/**
 * A ledger in the database `db` talks to (PostgresDialect or MysqlDialect), whose transactional
 * claims open their transaction with `db.transaction().execute()`: the claim, the handler's writes
 * through `ctx.tx` (the `trx`) and the completion commit together.
 */
export function kyselyLedger<Tx extends KyselyTransactionLike>(
  db: KyselyLike<Tx>,
  config?: OrmLedgerConfig,
): BridgedLedger<Tx>;
export function kyselyLedger<Tx extends KyselyTransactionLike>(
  db: KyselyLike<Tx>,
  config: OrmLedgerConfig | KyselySqliteLedgerConfig = {},
): BridgedLedger<Tx> {
  if (isSqliteDatabase(config.database) || writesSqlite(db)) {
    // `database` names the connection here, not MySQL's database of the ledger table
    const { database, ...rest } = config as KyselySqliteLedgerConfig;
    return sqliteOrmLedger(kyselySqlite(checkKyselySqlite(db, database), database), rest);
  }
  const server = config as OrmLedgerConfig;
  const bridge: SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> = kyselyBridge(db);
  return bridgedLedger(bridge, server);
}
