/**
 * oncemq on TypeORM: `typeormLedger(dataSource)` is a PostgreSQL, MySQL/MariaDB or SQLite
 * (better-sqlite3) ledger whose transactions TypeORM opens, so the handler's `ctx.tx` is the
 * transaction's `EntityManager` (`ctx.tx.getRepository(Points).save(…)`), and `ledger.join(manager)`
 * claims inside a transaction of your own. See docs/orm/typeorm.md.
 */
import type { SqlBridge } from './ledger/sql-bridge.js';
import type { MysqlConnectionLike } from './ledger/mysql/mysql-client.js';
import type { PgClientLike } from './ledger/postgres/postgres-client.js';
import { bridgedLedger, type BridgedLedger, type OrmLedgerConfig } from './orm/orm-ledger.js';
import { sqliteOrmLedger } from './orm/sqlite-orm-ledger.js';
import {
  typeormBridge,
  type TypeormDataSourceLike,
  type TypeormEntityManagerLike,
} from './orm/typeorm-bridge.js';
import { isTypeormSqlite, typeormSqlite } from './orm/typeorm-sqlite.js';

export { typeormBridge } from './orm/typeorm-bridge.js';
export type {
  TypeormDataSourceLike,
  TypeormEntityManagerLike,
  TypeormQueryResultLike,
  TypeormQueryRunnerLike,
} from './orm/typeorm-bridge.js';
export type { BridgedLedger, OrmLedgerConfig } from './orm/orm-ledger.js';
export type { SqlBridge } from './ledger/sql-bridge.js';

/**
 * A ledger in the database `dataSource` talks to (postgres, mysql/mariadb through mysql2, or
 * better-sqlite3), whose transactional claims open their transaction with `dataSource.transaction()`:
 * the claim, the handler's writes through `ctx.tx` (the transaction's `EntityManager`) and the
 * completion commit together. On PostgreSQL the ledger table goes to `config.schema`, else to the data
 * source's `schema` option, else to `public`. On SQLite the ledger takes turns with nothing but
 * itself on TypeORM's one connection: a claim that finds a transaction of the application open there
 * is refused (LedgerUnavailableError), and inside one, `ledger.join(manager)` claims.
 */
export function typeormLedger<Tx extends TypeormEntityManagerLike>(
  dataSource: TypeormDataSourceLike<Tx>,
  config: OrmLedgerConfig = {},
): BridgedLedger<Tx> {
  if (isTypeormSqlite(dataSource)) return sqliteOrmLedger(typeormSqlite(dataSource), config);
  const bridge: SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> = typeormBridge(dataSource);
  const schema = bridge.database === 'postgres' ? (config.schema ?? dataSource.options.schema) : undefined;
  return bridgedLedger(bridge, schema === undefined ? config : { ...config, schema });
}
