import { parseDuration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { toLogger } from '../../core/logger.js';
import { RuntimeLedger } from '../runtime-ledger.js';
import type { SqlDialect } from '../sql-dialect.js';
import { DEFAULT_SQL_LEDGER_CONFIG, type SqlLedgerConfig } from '../sql-ledger-config.js';
import { MysqlBackend } from './mysql-backend.js';
import {
  MAX_MYSQL_TABLE_LENGTH,
  mysqlIdentifier,
  type MysqlConnectionLike,
  type MysqlPoolLike,
} from './mysql-client.js';

export interface MysqlLedgerConfig<
  Conn extends MysqlConnectionLike = MysqlConnectionLike,
> extends SqlLedgerConfig {
  /**
   * The application's mysql2/promise pool: each transactional claim takes a connection, opens the
   * transaction, runs the handler with that connection as `ctx.tx` and commits. Give `pool` or
   * `connection`, not both. @default none
   */
  readonly pool?: MysqlPoolLike<Conn>;
  /**
   * An open connection: a transactional claim joins the transaction already open on it (through a
   * savepoint) or opens one; operations on it run one at a time. @default none
   */
  readonly connection?: Conn;
  /** Database (schema) of the ledger table. @default the connection's current database */
  readonly database?: string;
  /** Ledger table name (at most 57 characters). @default 'oncemq_ledger' */
  readonly table?: string;
  /** Times a claim transaction is run again after a deadlock or a lock-wait timeout. @default 3 */
  readonly lockRetries?: number;
}

export const DEFAULT_MYSQL_LEDGER_CONFIG = Object.freeze({
  ...DEFAULT_SQL_LEDGER_CONFIG,
  lockRetries: 3,
} as const);

/**
 * Ledger in a MySQL 8 or MariaDB 10.6+ database through mysql2/promise. Transactional mode runs the
 * claim and the handler's writes in one InnoDB transaction on the application's pool or connection.
 */
export class MysqlLedger<Conn extends MysqlConnectionLike = MysqlConnectionLike> extends RuntimeLedger<Conn> {
  /** How statements run in the handler's transaction (`transition(ledger.dialect, ctx.tx, …)`). */
  declare readonly dialect: SqlDialect<Conn>;
  /** The quoted, possibly database-qualified table name. */
  readonly table: string;

  constructor(config: MysqlLedgerConfig<Conn>) {
    if ((config.pool === undefined) === (config.connection === undefined)) {
      throw new ConfigError('pool', 'give either a mysql2/promise pool or an open connection, not both');
    }
    const tableName = config.table ?? DEFAULT_MYSQL_LEDGER_CONFIG.table;
    const quoted = mysqlIdentifier(tableName, 'table', MAX_MYSQL_TABLE_LENGTH);
    const versions = mysqlIdentifier(`${tableName}_schema`, 'table');
    const prefix = config.database === undefined ? '' : `${mysqlIdentifier(config.database, 'database')}.`;
    const lockRetries = config.lockRetries ?? DEFAULT_MYSQL_LEDGER_CONFIG.lockRetries;
    if (!Number.isInteger(lockRetries) || lockRetries < 0 || lockRetries > 100) {
      throw new ConfigError(
        'lockRetries',
        `must be a whole number from 0 to 100, got ${String(lockRetries)}`,
      );
    }
    const logger = toLogger(config.logger);
    const backend = new MysqlBackend<Conn>({
      pool: config.pool,
      connection: config.connection,
      tableName,
      database: config.database,
      table: prefix + quoted,
      versions: prefix + versions,
      retentionMs: parseDuration(config.retention ?? DEFAULT_MYSQL_LEDGER_CONFIG.retention, 'retention'),
      lockRetries,
      migrate: config.migrate ?? DEFAULT_MYSQL_LEDGER_CONFIG.migrate,
      clock: config.clock ?? Date.now,
      logger,
    });
    super(backend, { logger });
    this.table = prefix + quoted;
  }
}
