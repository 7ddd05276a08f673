import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { RuntimeLedger } from '../runtime-ledger.js';
import type { SqlDialect } from '../sql-dialect.js';
import { DEFAULT_SQL_LEDGER_CONFIG, type SqlLedgerConfig } from '../sql-ledger-config.js';
import { sqlIdentifier } from '../sql-identifier.js';
import { SqliteBackend } from './sqlite-backend.js';
import { SQLITE_BATCH_INSERT_ROWS } from './sqlite-batch-claim.js';
import type { SqliteConnectionSource } from './sqlite-connection-source.js';
import type { SqliteDatabaseLike, SqliteHandle } from './sqlite-database.js';
import { joinedSqliteSource } from './sqlite-joined-source.js';

export type { SqliteDatabaseLike, SqliteHandle, SqliteStatementLike } from './sqlite-database.js';
export type { SqliteConnectionSource } from './sqlite-connection-source.js';

/** Input of `new SqliteLedger(config)`: the database (or a path to open, or a tool lending it), and the table. */
export interface SqliteLedgerConfig<
  Db extends SqliteDatabaseLike = SqliteDatabaseLike,
  Tx = Db,
> extends SqlLedgerConfig {
  /**
   * The database: an open better-sqlite3 `Database` (the handler's writes through `ctx.tx` then share
   * the claim's transaction), or a file path that oncemq opens (`:memory:` for a private in-memory one).
   * Give exactly one of `database` and `source`.
   */
  readonly database?: Db | string;
  /**
   * A query builder or ORM that owns the connection and lends it (adapters: `knexLedger(knex)` from
   * `oncemq/knex`, `kyselyLedger(db, { database })` from `oncemq/kysely`): each transactional claim runs
   * in a transaction the tool opens, under a savepoint of it, and `ctx.tx` is the tool's transaction;
   * every other operation runs on the connection while the tool lends it. Instead of `database`.
   */
  readonly source?: SqliteConnectionSource<Db, Tx>;
  /** How long to wait for another process's write lock (only for a database oncemq opens). @default '5s' */
  readonly busyTimeout?: Duration;
  /**
   * `synchronous` pragma for a database oncemq opens. `full` makes every commit durable before the
   * message is acked; `normal` may lose the last commits on power loss (while the broker thinks they
   * were processed). @default 'full'
   */
  readonly synchronous?: 'full' | 'normal';
  /**
   * What the handler receives as `ctx.tx` instead of the database (adapters: `drizzleLedger(db)`
   * from `oncemq/drizzle`), and the way back to the database for `ledger.dialect`. @default the database itself
   */
  readonly handle?: SqliteHandle<Db, Tx>;
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
export class SqliteLedger<
  Db extends SqliteDatabaseLike = SqliteDatabaseLike,
  Tx = Db,
> extends RuntimeLedger<Tx> {
  /** How statements run in the handler's transaction (`transition(ledger.dialect, ctx.tx, …)`). */
  declare readonly dialect: SqlDialect<Tx>;
  /** The ledger table's name, checked. */
  readonly table: string;

  /** Rows per multi-row INSERT of a batch claim (8 bound values each, well under SQLite's limit). */
  static readonly BATCH_INSERT_ROWS = SQLITE_BATCH_INSERT_ROWS;

  readonly #config: SqliteLedgerConfig<Db, Tx>;
  readonly #backend: SqliteBackend<Db, Tx>;

  /**
   * `joinedTx`: the ledger is joined to that transaction of the tool of `config.source` (see join()):
   * its claims run under savepoints of it and it has no leased claims.
   */
  constructor(config: SqliteLedgerConfig<Db, Tx>, joinedTx?: Tx) {
    const database = config.database as unknown;
    const source = config.source;
    if (source !== undefined) {
      if (database !== undefined) {
        throw new ConfigError(
          'database',
          'give either database or source (a query builder lending it), not both',
        );
      }
    } else if (typeof database !== 'string' && (typeof database !== 'object' || database === null)) {
      throw new ConfigError('database', 'expected a better-sqlite3 Database or a file path');
    }
    const synchronous = config.synchronous ?? DEFAULT_SQLITE_LEDGER_CONFIG.synchronous;
    if (!(['full', 'normal'] as unknown[]).includes(synchronous)) {
      throw new ConfigError('synchronous', `expected 'full' or 'normal', got ${JSON.stringify(synchronous)}`);
    }
    const table = sqlIdentifier(config.table ?? DEFAULT_SQLITE_LEDGER_CONFIG.table, 'table');
    const path = typeof config.database === 'string' ? config.database : 'PATH';
    const backend = new SqliteBackend<Db, Tx>({
      database: config.database,
      handle: config.handle,
      source: source === undefined || joinedTx === undefined ? source : joinedSqliteSource(source, joinedTx),
      leased: joinedTx === undefined,
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
    this.#config = config;
    this.#backend = backend;
  }

  /**
   * The ledger joined to `tx`, a transaction the application opened with the tool the ledger was built
   * on (`source`; same table, clock and logger): each claim runs under a savepoint of it, on its
   * connection, and the application commits; the work gets `tx` back. No leased claims (a lease must be
   * visible before the transaction ends). A ConfigError for what is not an open transaction of that
   * tool, and on a ledger given a better-sqlite3 database (its claims already run under a savepoint of
   * a transaction open on that database).
   */
  join(tx: Tx): SqliteLedger<Db, Tx> {
    if (this.#config.source === undefined) {
      throw new ConfigError(
        'tx',
        'join() needs a ledger built on a query builder (knexLedger, kyselyLedger); a ledger given the ' +
          'better-sqlite3 database claims under a savepoint of a transaction already open on it',
      );
    }
    return new SqliteLedger<Db, Tx>({ ...this.#config, migrate: false }, tx);
  }

  /** The database the ledger lives in (opened by init() when a path was given). */
  get database(): Db {
    return this.#backend.db;
  }
}
