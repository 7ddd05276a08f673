import { ConfigError } from '../core/errors.js';
import { DEFAULT_SQL_LEDGER_CONFIG, type SqlLedgerConfig } from '../ledger/sql-ledger-config.js';
import { sqlIdentifier } from '../ledger/sql-identifier.js';
import type { SqliteConnectionSource } from '../ledger/sqlite/sqlite-connection-source.js';
import type { SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';
import { SqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';

/** Options of a PostgreSQL or MySQL ledger, refused on SQLite. */
const SERVER_ONLY = ['schema', 'partitioned', 'database', 'lockRetries'] as const;

/**
 * Refuses, in the configuration of a SQLite ledger built on an ORM or query builder, the options of a
 * PostgreSQL or MySQL ledger; `database` is left to a tool that names its connection with it (Kysely).
 */
export function refuseServerOptions(config: object, own: readonly string[] = []): void {
  for (const field of SERVER_ONLY) {
    if (!own.includes(field) && (config as Record<string, unknown>)[field] !== undefined) {
      throw new ConfigError(field, 'is not an option of a sqlite ledger');
    }
  }
}

/**
 * The SQLite ledger on the connection a query builder lends (`source`, made for the ledger's table):
 * its claims run in the tool's transactions and `ctx.tx` is the tool's transaction object. The options
 * of a server ledger are refused, but for those the tool names `own`.
 */
export function sqliteSourceLedger<Tx>(
  source: (table: string) => SqliteConnectionSource<SqliteDatabaseLike, Tx>,
  config: SqlLedgerConfig,
  own: readonly string[] = [],
): SqliteLedger<SqliteDatabaseLike, Tx> {
  refuseServerOptions(config, own);
  const { retention, migrate, logger, clock } = config;
  const table = sqlIdentifier(config.table ?? DEFAULT_SQL_LEDGER_CONFIG.table, 'table');
  return new SqliteLedger<SqliteDatabaseLike, Tx>({
    table,
    retention,
    migrate,
    logger,
    clock,
    source: source(table),
  });
}

/**
 * The connection of an application's transaction, checked open: a statement run on it outside one
 * would commit on its own. `tool` names the transaction in the message (`a Knex transaction`).
 */
export function openTransaction(db: SqliteDatabaseLike, tool: string): SqliteDatabaseLike {
  if (!db.inTransaction) throw transactionEnded(tool);
  return db;
}

/** The refusal of a transaction that has ended: `tool` names it (`this Knex transaction`). */
export function transactionEnded(tool: string): ConfigError {
  return new ConfigError(
    'tx',
    `${tool} has ended (no transaction is open on its connection), so this write would commit on its own: ` +
      'use ctx.tx in a handler, or a transaction of yours while it is open',
  );
}
