import type { Duration } from '../core/duration.js';
import type { LoggerLike } from '../core/logger.js';

/** What every SQL ledger's configuration (SQLite, PostgreSQL, MySQL) has besides its connection. */
export interface SqlLedgerConfig {
  /** Ledger table name. @default 'oncemq_ledger' */
  readonly table?: string;
  /** How long finished rows are kept. Must outlast the redelivery horizon. @default '7d' */
  readonly retention?: Duration;
  /**
   * Creates or upgrades the table from init(). With `false` (migrations run in a deploy step, or a
   * read-only tool such as `oncemq ledger`), init() only checks that the table exists at the schema
   * version this oncemq knows, and throws a ConfigError naming the table and the `oncemq migrate`
   * command otherwise; it never creates a file, schema or table. @default true
   */
  readonly migrate?: boolean;
  /**
   * Where the ledger reports that it is ready or closed (and, on MySQL, the lock conflicts it retries).
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
  /**
   * Clock in epoch milliseconds for leases and timestamps. Leases use the application's clock (not
   * the database's), so hosts sharing a ledger must keep their clocks in sync well within a lease.
   * @default Date.now
   */
  readonly clock?: () => number;
}

/** The defaults every SQL ledger shares. */
export const DEFAULT_SQL_LEDGER_CONFIG = Object.freeze({
  /** The ledger table's name. */
  table: 'oncemq_ledger',
  /** Finished rows are kept a week: well past the default redelivery horizon (4h45m40s plus a day). */
  retention: '7d',
  /** `init()` creates or upgrades the table. */
  migrate: true,
} as const);
