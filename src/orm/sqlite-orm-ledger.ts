import { parseDuration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import { RuntimeLedger } from '../ledger/runtime-ledger.js';
import type { SqlDialect } from '../ledger/sql-dialect.js';
import { sqlIdentifier } from '../ledger/sql-identifier.js';
import { SqliteBackend } from '../ledger/sqlite/sqlite-backend.js';
import type { SqliteConnectionSource } from '../ledger/sqlite/sqlite-connection-source.js';
import { isSqliteDatabase, type SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';
import { DEFAULT_SQLITE_LEDGER_CONFIG } from '../ledger/sqlite/sqlite-ledger.js';
import type { BridgedLedger, OrmLedgerConfig } from './orm-ledger.js';

/** An ORM that owns a better-sqlite3 connection, as a SQLite ledger through it needs it. */
export interface SqliteOrm<Tx> {
  /** How the ledger reaches the connection: its turns and the transactions the ORM opens on it. */
  readonly source: SqliteConnectionSource<SqliteDatabaseLike, Tx>;
  /**
   * Throws a ConfigError unless `tx` is the ORM's transaction object of an open transaction on the
   * ledger's connection (`source.database(tx)` then finds the connection).
   */
  checkTransaction(tx: Tx): void;
}

/**
 * The source of a ledger joined to `tx`, a transaction the application opened with the ORM: every
 * statement runs in it (the claims under a savepoint), checked open each time.
 */
function joinedSource<Tx>(
  source: SqliteConnectionSource<SqliteDatabaseLike, Tx>,
  tx: Tx,
): SqliteConnectionSource<SqliteDatabaseLike, Tx> {
  return {
    memory: source.memory,
    hold: async (work) => work(await source.database(tx)),
    transaction: async (work) => work(await source.database(tx), tx),
    database: (other) => source.database(other),
  };
}

/** Options of a PostgreSQL or MySQL ledger, refused on SQLite. */
const SERVER_ONLY = ['schema', 'partitioned', 'database', 'lockRetries'] as const;

/** Refuses, in the configuration of a SQLite ledger built on an ORM or query builder, the options of a PostgreSQL or MySQL ledger. */
export function refuseServerOptions(config: OrmLedgerConfig): void {
  for (const field of SERVER_ONLY) {
    if (config[field] !== undefined) throw new ConfigError(field, 'is not an option of a sqlite ledger');
  }
}

/** The refusal of a transaction that has ended: `tool` names it (`this Knex transaction`). */
export function transactionEnded(tool: string): ConfigError {
  return new ConfigError(
    'tx',
    `${tool} has ended (no transaction is open on its connection), so this write would commit on its own: ` +
      'use ctx.tx in a handler, or a transaction of yours while it is open',
  );
}

/**
 * The connection of an application's transaction, checked open: a statement run on it outside one
 * would commit on its own. `tool` names the transaction in the message (`this Knex transaction`).
 */
export function openTransaction(db: SqliteDatabaseLike, tool: string): SqliteDatabaseLike {
  if (!db.inTransaction) throw transactionEnded(tool);
  return db;
}

/**
 * A SQLite ledger whose connection an ORM owns: every transactional claim is a transaction the ORM
 * opens (the ledger's statements under a savepoint of it), `ctx.tx` is the ORM's transaction object,
 * and everything else waits its turn on the connection through the ORM.
 */
class SqliteOrmLedger<Tx> extends RuntimeLedger<Tx> implements BridgedLedger<Tx> {
  declare readonly dialect: SqlDialect<Tx>;

  readonly #orm: SqliteOrm<Tx>;
  readonly #config: OrmLedgerConfig;

  constructor(orm: SqliteOrm<Tx>, config: OrmLedgerConfig, joinedTo?: { readonly tx: Tx }) {
    const table = sqlIdentifier(config.table ?? DEFAULT_SQLITE_LEDGER_CONFIG.table, 'table');
    const joined = joinedTo !== undefined;
    if (joined) orm.checkTransaction(joinedTo.tx);
    const source = joined ? joinedSource(orm.source, joinedTo.tx) : orm.source;
    const backend = new SqliteBackend<SqliteDatabaseLike, Tx>({
      database: undefined,
      handle: undefined,
      source: {
        ...source,
        // a better-sqlite3 Database passes as it is: the relay and outbox.migrate() run on one of their own
        database: (tx) => (isSqliteDatabase(tx) ? tx : source.database(tx)),
      },
      leased: !joined,
      table,
      retentionMs: parseDuration(config.retention ?? DEFAULT_SQLITE_LEDGER_CONFIG.retention, 'retention'),
      clock: config.clock ?? Date.now,
      migrate: !joined && (config.migrate ?? DEFAULT_SQLITE_LEDGER_CONFIG.migrate),
      file: {
        busyTimeoutMs: 0,
        synchronous: DEFAULT_SQLITE_LEDGER_CONFIG.synchronous,
        fix: `oncemq migrate --store sqlite --url PATH --table ${table}`,
      },
    });
    super(backend, { logger: config.logger });
    this.#orm = orm;
    this.#config = config;
  }

  join(tx: Tx): BridgedLedger<Tx> {
    return new SqliteOrmLedger(this.#orm, this.#config, { tx });
  }
}

/**
 * The SQLite ledger of `orm` (the better-sqlite3 connection of Knex, Kysely, TypeORM or MikroORM): `ctx.tx` is the ORM's
 * transaction object, and `ledger.join(tx)` claims inside a transaction of the application's own. An
 * option of a PostgreSQL or MySQL ledger is refused.
 */
export function sqliteOrmLedger<Tx>(orm: SqliteOrm<Tx>, config: OrmLedgerConfig = {}): BridgedLedger<Tx> {
  refuseServerOptions(config);
  return new SqliteOrmLedger(orm, config);
}
