import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { RuntimeLedger } from '../runtime-ledger.js';
import type { SqlDialect } from '../sql-dialect.js';
import { DEFAULT_SQL_LEDGER_CONFIG, type SqlLedgerConfig } from '../sql-ledger-config.js';
import { sqlIdentifier } from '../sql-identifier.js';
import { SqliteBackend } from './sqlite-backend.js';
import { SQLITE_BATCH_INSERT_ROWS } from './sqlite-batch-claim.js';
import type { SqliteDatabaseLike } from './sqlite-database.js';

export type { SqliteDatabaseLike, SqliteStatementLike } from './sqlite-database.js';

/** Input of `new SqliteLedger(config)`: the database (or a path to open), and the table. */
export interface SqliteLedgerConfig<
  Db extends SqliteDatabaseLike = SqliteDatabaseLike,
> extends SqlLedgerConfig {
  /**
   * The database: an open better-sqlite3 `Database` (the handler's writes through `ctx.tx` then share
   * the claim's transaction), or a file path that oncemq opens (`:memory:` for a private in-memory one).
   */
  readonly database: Db | string;
  /** How long to wait for another process's write lock (only for a database oncemq opens). @default '5s' */
  readonly busyTimeout?: Duration;
  /**
   * `synchronous` pragma for a database oncemq opens. `full` makes every commit durable before the
   * message is acked; `normal` may lose the last commits on power loss (while the broker thinks they
   * were processed). @default 'full'
   */
  readonly synchronous?: 'full' | 'normal';
}

/** Defaults of the {@link SqliteLedgerConfig} fields that have a fixed one. */
export const DEFAULT_SQLITE_LEDGER_CONFIG = Object.freeze({
  ...DEFAULT_SQL_LEDGER_CONFIG,
  /** Wait up to 5 s for another process's write lock. */
  busyTimeout: '5s',
  /** Every commit is durable before the message is acked. */
  synchronous: 'full',
} as const);

/**
 * Ledger in a SQLite database through better-sqlite3. Transactional mode shares one local
 * transaction between the claim and the handler's writes (`ctx.tx` is the database).
 *
 * One connection runs one transaction at a time: while a transactional handler awaits, other
 * operations on the same ledger wait their turn. Processes sharing a file serialize on SQLite's
 * write lock (`BEGIN IMMEDIATE`, with the busy timeout).
 */
export class SqliteLedger<Db extends SqliteDatabaseLike = SqliteDatabaseLike> extends RuntimeLedger<Db> {
  /** How statements run in the handler's transaction (`transition(ledger.dialect, ctx.tx, …)`). */
  declare readonly dialect: SqlDialect<Db>;
  /** The ledger table's name, checked. */
  readonly table: string;

  /** Rows per multi-row INSERT of a batch claim (8 bound values each, well under SQLite's limit). */
  static readonly BATCH_INSERT_ROWS = SQLITE_BATCH_INSERT_ROWS;

  readonly #backend: SqliteBackend<Db>;

  constructor(config: SqliteLedgerConfig<Db>) {
    const database = config.database as unknown;
    if (typeof database !== 'string' && (typeof database !== 'object' || database === null)) {
      throw new ConfigError('database', 'expected a better-sqlite3 Database or a file path');
    }
    const synchronous = config.synchronous ?? DEFAULT_SQLITE_LEDGER_CONFIG.synchronous;
    if (!(['full', 'normal'] as unknown[]).includes(synchronous)) {
      throw new ConfigError('synchronous', `expected 'full' or 'normal', got ${JSON.stringify(synchronous)}`);
    }
    const table = sqlIdentifier(config.table ?? DEFAULT_SQLITE_LEDGER_CONFIG.table, 'table');
    const path = typeof config.database === 'string' ? config.database : 'PATH';
    const backend = new SqliteBackend<Db>({
      database: config.database,
      table,
      retentionMs: parseDuration(config.retention ?? DEFAULT_SQLITE_LEDGER_CONFIG.retention, 'retention'),
      clock: config.clock ?? Date.now,
      migrate: config.migrate ?? DEFAULT_SQLITE_LEDGER_CONFIG.migrate,
      file: {
        busyTimeoutMs: parseDuration(
          config.busyTimeout ?? DEFAULT_SQLITE_LEDGER_CONFIG.busyTimeout,
          'busyTimeout',
        ),
        synchronous,
        fix: `oncemq migrate --store sqlite --url ${path} --table ${table}`,
      },
    });
    super(backend, { logger: config.logger });
    this.table = table;
    this.#backend = backend;
  }

  /** The database the ledger lives in (opened by init() when a path was given). */
  get database(): Db {
    return this.#backend.db;
  }
}
