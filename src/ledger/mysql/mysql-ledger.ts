import { parseDuration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { toLogger } from '../../core/logger.js';
import { RuntimeLedger } from '../runtime-ledger.js';
import { checkBridge, type SqlBridge } from '../sql-bridge.js';
import type { SqlDialect } from '../sql-dialect.js';
import { DEFAULT_SQL_LEDGER_CONFIG, type SqlLedgerConfig } from '../sql-ledger-config.js';
import { MysqlBackend } from './mysql-backend.js';
import {
  MAX_MYSQL_TABLE_LENGTH,
  mysqlIdentifier,
  type MysqlConnectionLike,
  type MysqlPoolLike,
} from './mysql-client.js';

/** Input of `new MysqlLedger(config)`: a mysql2/promise pool or connection, and the table. */
export interface MysqlLedgerConfig<
  Conn extends MysqlConnectionLike = MysqlConnectionLike,
  Tx = Conn,
> extends SqlLedgerConfig {
  /**
   * The application's mysql2/promise pool: each transactional claim takes a connection, opens the
   * transaction, runs the handler with that connection as `ctx.tx` and commits. Give one of `pool`,
   * `connection` or `bridge`. @default none
   */
  readonly pool?: MysqlPoolLike<Conn>;
  /**
   * An open connection: a transactional claim joins the transaction already open on it (through a
   * savepoint) or opens one; operations on it run one at a time. @default none
   */
  readonly connection?: Conn;
  /**
   * The application's ORM or query builder (`knexBridge(knex)` from `oncemq/knex`, …): each
   * transactional claim opens its transaction through it and hands the tool's own transaction object
   * to the handler as `ctx.tx`. The ORM adapters build the ledger with it (`knexLedger(knex)`). @default none
   */
  readonly bridge?: SqlBridge<MysqlConnectionLike, Tx>;
  /** Database (schema) of the ledger table. @default the connection's current database */
  readonly database?: string;
  /** Ledger table name (at most 57 characters). @default 'oncemq_ledger' */
  readonly table?: string;
  /** Times a claim transaction is run again after a deadlock or a lock-wait timeout. @default 3 */
  readonly lockRetries?: number;
}

/** Defaults of the {@link MysqlLedgerConfig} fields that have a fixed one. */
export const DEFAULT_MYSQL_LEDGER_CONFIG = Object.freeze({
  ...DEFAULT_SQL_LEDGER_CONFIG,
  /** A claim transaction is run again up to 3 times after a deadlock or lock-wait timeout. */
  lockRetries: 3,
} as const);

/**
 * Ledger in a MySQL 8 or MariaDB 10.6+ database through mysql2/promise. Transactional mode runs the
 * claim and the handler's writes in one InnoDB transaction on the application's pool or connection.
 */
export class MysqlLedger<
  Conn extends MysqlConnectionLike = MysqlConnectionLike,
  Tx = Conn,
> extends RuntimeLedger<Tx> {
  /** How statements run in the handler's transaction (`transition(ledger.dialect, ctx.tx, …)`). */
  declare readonly dialect: SqlDialect<Tx>;
  /** The quoted, possibly database-qualified table name. */
  readonly table: string;

  readonly #config: MysqlLedgerConfig<Conn, Tx>;

  constructor(config: MysqlLedgerConfig<Conn, Tx>, joinedTx?: Tx) {
    const sources = [config.pool, config.connection, config.bridge].filter((s) => s !== undefined).length;
    const joinedBridge = joinedTx !== undefined && config.connection !== undefined && sources === 2;
    if (sources !== 1 && !joinedBridge) {
      throw new ConfigError(
        'pool',
        'give one of pool (a mysql2/promise pool), connection (an open connection) or bridge (an ORM adapter)',
      );
    }
    if (config.bridge !== undefined) checkBridge(config.bridge, 'mysql');
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
    const backend = new MysqlBackend<Conn, Tx>({
      pool: config.pool,
      connection: config.connection,
      joinedTx,
      bridge: config.bridge,
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
    this.#config = config;
  }

  /**
   * The ledger joined to `tx`, the caller's open transaction (same table, clock and logger): a mysql2
   * connection inside START TRANSACTION, or the ORM's transaction object for a ledger built on a
   * bridge. Each claim runs under a savepoint of it and the caller commits; the work gets `tx` back.
   */
  join(tx: Tx): MysqlLedger<Conn, Tx> {
    const { retention, clock, logger, database, table, lockRetries, bridge } = this.#config;
    const common = { retention, clock, logger, database, table, lockRetries, migrate: false };
    if (bridge === undefined)
      return new MysqlLedger<Conn, Tx>({ ...common, connection: tx as unknown as Conn });
    return new MysqlLedger<Conn, Tx>({ ...common, bridge, connection: bridge.connection(tx) as Conn }, tx);
  }
}
