import { ConfigError } from '../core/errors.js';
import type { Ledger } from '../ledger/ledger.js';
import type { SqlDialect } from '../ledger/sql-dialect.js';
import { sqlIdentifier } from '../ledger/sql-identifier.js';
import { outboxSql } from './dialects/outbox-dialects.js';
import type { OutboxSql, OutboxTables } from './dialects/outbox-sql.js';

/** Longest outbox table name: the ordering-key table adds `_keys`, the NOTIFY channel a prefix. */
export const MAX_OUTBOX_TABLE_LENGTH = 40;

/** Input of `createOutbox(config)`: the database (by its dialect or a ledger) and the table. */
export interface OutboxConfig<Tx> {
  /** The SQL dialect of the database the outbox lives in. Give this or `ledger`. */
  readonly dialect?: SqlDialect<Tx>;
  /** A SQL ledger whose database (and dialect) the outbox shares, so `ctx.outbox` writes in the claim's transaction. */
  readonly ledger?: Ledger<Tx>;
  /** Table of the outgoing messages; a second table `<table>_keys` holds the sequence of each ordering key. @default 'oncemq_outbox' */
  readonly table?: string;
  /** PostgreSQL schema of the tables. @default the connection's search path */
  readonly schema?: string;
  /**
   * PostgreSQL: `add()` also runs `pg_notify` in the caller's transaction, so a listening relay wakes
   * at its commit instead of at its next poll. Ignored elsewhere. @default true
   */
  readonly notify?: boolean;
}

/** Defaults of the {@link OutboxConfig} fields that have a fixed one. */
export const DEFAULT_OUTBOX_CONFIG = Object.freeze({
  /** The outbox table's name. */
  table: 'oncemq_outbox',
  /** PostgreSQL: `add()` notifies listening relays. */
  notify: true,
} as const);

/** An outbox configuration, checked, with the quoted names its statements use. */
export interface ResolvedOutboxConfig<Tx> extends OutboxTables {
  readonly dialect: SqlDialect<Tx>;
  /** What is written differently on this database. */
  readonly sql: OutboxSql;
  readonly table: string;
  readonly schema: string | undefined;
  /** Quoted, schema-qualified outbox table. */
  readonly messages: string;
  /** Quoted, schema-qualified ordering-key table. */
  readonly keys: string;
  /** Quoted name of an index, qualified where the database wants it. */
  readonly index: (suffix: string) => string;
  /** PostgreSQL NOTIFY channel, when notifications are on. */
  readonly channel: string | undefined;
}

function dialectOf<Tx>(config: OutboxConfig<Tx>): SqlDialect<Tx> {
  if (config.dialect !== undefined && config.ledger !== undefined) {
    throw new ConfigError('dialect', 'give either dialect or ledger, not both');
  }
  const dialect = config.dialect ?? config.ledger?.dialect;
  const shape = dialect as Partial<SqlDialect<Tx>> | undefined;
  if (dialect === undefined || typeof shape?.execute !== 'function' || typeof shape.query !== 'function') {
    throw new ConfigError(
      config.ledger === undefined ? 'dialect' : 'ledger',
      config.ledger === undefined
        ? 'pass the SQL dialect of the database (postgresDialect, mysqlDialect, sqliteDialect) or a SQL ledger'
        : `ledger '${config.ledger.name}' has no SQL dialect: the outbox needs a SQL database (PostgreSQL, MySQL/MariaDB, SQLite)`,
    );
  }
  return dialect;
}

/** Checks an outbox configuration at start-up: hostile or over-long names are refused, never escaped. */
export function resolveOutboxConfig<Tx>(config: OutboxConfig<Tx>): ResolvedOutboxConfig<Tx> {
  const dialect = dialectOf(config);
  const sql = outboxSql(dialect.name);
  const table = sqlIdentifier(config.table ?? DEFAULT_OUTBOX_CONFIG.table, 'table');
  if (table.length > MAX_OUTBOX_TABLE_LENGTH) {
    throw new ConfigError('table', `'${table}' is longer than ${MAX_OUTBOX_TABLE_LENGTH} characters`);
  }
  const schema = config.schema === undefined ? undefined : sqlIdentifier(config.schema, 'schema');
  if (schema !== undefined && !sql.schemas) {
    throw new ConfigError('schema', `schemas are PostgreSQL's; on ${dialect.name} name the table only`);
  }
  const q = (name: string): string => dialect.quote(name);
  const qualify = (name: string): string => (schema === undefined ? q(name) : `${q(schema)}.${q(name)}`);
  const notify = config.notify ?? DEFAULT_OUTBOX_CONFIG.notify;
  if (typeof notify !== 'boolean') throw new ConfigError('notify', 'must be true or false');
  return Object.freeze({
    dialect,
    sql,
    table,
    schema,
    messages: qualify(table),
    keys: qualify(`${table}_keys`),
    // PostgreSQL and SQLite index names live in the table's schema; MySQL's belong to the table.
    index: (suffix: string) => q(`${table}_${suffix}`),
    channel: sql.notifies && notify ? `oncemq_outbox_${table}` : undefined,
  });
}
