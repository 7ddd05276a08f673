/**
 * oncemq on MikroORM 6: `mikroOrmLedger(orm.em)` is a PostgreSQL, MySQL/MariaDB or SQLite
 * (`@mikro-orm/better-sqlite`) ledger whose transactions MikroORM opens, so the handler's `ctx.tx` is the transaction's EntityManager
 * (`ctx.tx.persist(…)`, flushed before the commit), and `ledger.join(em)` claims inside a transaction
 * of your own. See docs/orm/mikro-orm.md.
 */
import type { SqlBridge } from './ledger/sql-bridge.js';
import type { MysqlConnectionLike } from './ledger/mysql/mysql-client.js';
import type { PgClientLike } from './ledger/postgres/postgres-client.js';
import { mikroOrmBridge, type MikroOrmEntityManagerLike } from './orm/mikro-orm-bridge.js';
import { isMikroOrmSqlite, mikroOrmSqlite } from './orm/mikro-orm-sqlite.js';
import { bridgedLedger, type BridgedLedger, type OrmLedgerConfig } from './orm/orm-ledger.js';
import { sqliteOrmLedger } from './orm/sqlite-orm-ledger.js';

export { mikroOrmBridge } from './orm/mikro-orm-bridge.js';
export type { MikroOrmConnectionLike, MikroOrmEntityManagerLike } from './orm/mikro-orm-bridge.js';
export type { BridgedLedger, OrmLedgerConfig } from './orm/orm-ledger.js';
export type { SqlBridge } from './ledger/sql-bridge.js';

/**
 * A ledger in the database `em` talks to (@mikro-orm/postgresql, @mikro-orm/mysql,
 * @mikro-orm/mariadb or @mikro-orm/better-sqlite, version 6), whose transactional claims open their
 * transaction with `em.fork().transactional()`: the claim, the handler's writes through `ctx.tx` (the
 * transaction's EntityManager, flushed before the commit) and the completion commit together. On
 * PostgreSQL the ledger table goes to `config.schema`, else to the ORM's `schema` option, else to
 * `public`. On SQLite every statement of the ledger takes the ORM's one connection from its pool.
 */
export function mikroOrmLedger<Em extends MikroOrmEntityManagerLike>(
  em: Em,
  config: OrmLedgerConfig = {},
): BridgedLedger<Em> {
  if (isMikroOrmSqlite(em)) return sqliteOrmLedger(mikroOrmSqlite(em), config);
  const bridge: SqlBridge<PgClientLike, Em> | SqlBridge<MysqlConnectionLike, Em> = mikroOrmBridge(em);
  const configured = bridge.database === 'postgres' ? em.config?.get('schema') : undefined;
  const schema = config.schema ?? (typeof configured === 'string' ? configured : undefined);
  return bridgedLedger(bridge, schema === undefined ? config : { ...config, schema });
}
