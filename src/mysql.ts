/**
 * The MySQL 8 / MariaDB 10.6+ ledger, through mysql2 3 (docs/ledgers/mysql.md).
 *
 * @module oncemq/mysql
 */
export { DEFAULT_MYSQL_LEDGER_CONFIG, MysqlLedger } from './ledger/mysql/mysql-ledger.js';
export type { MysqlLedgerConfig } from './ledger/mysql/mysql-ledger.js';
export { MAX_MYSQL_TABLE_LENGTH } from './ledger/mysql/mysql-client.js';
export type {
  MysqlConnectionLike,
  MysqlPoolConnectionLike,
  MysqlPoolLike,
  MysqlValue,
} from './ledger/mysql/mysql-client.js';
export { mysqlDialect } from './ledger/mysql/mysql-dialect.js';
export type { MysqlExecutorLike } from './ledger/mysql/mysql-dialect.js';
