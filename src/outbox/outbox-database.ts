import { ConfigError } from '../core/errors.js';
import type { MysqlPoolLike } from '../sql/mysql-like.js';
import type { PgPoolLike } from '../sql/postgres-like.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import type { SqlDialect } from '../ledger/sql-dialect.js';
import type { SqliteDatabaseLike } from '../sql/sqlite-like.js';
import { outboxSql } from './dialects/outbox-dialects.js';
import { bridgeSession, type OutboxSession } from './outbox-session.js';

export type { OutboxSession } from './outbox-session.js';

/**
 * Where the relay (and `migrate`) opens transactions of its own: a pg `Pool`, a mysql2/promise
 * `Pool`, a better-sqlite3 `Database` of the relay's own (not the connection the application
 * writes through: SQLite has one transaction per connection), or — for an outbox on an ORM
 * ledger — the ORM's bridge (`knexBridge(knex)`, …), whose transactions the tool opens.
 */
export type OutboxDatabase = PgPoolLike | MysqlPoolLike | SqliteDatabaseLike | SqlBridge<unknown, unknown>;

function isBridge(database: OutboxDatabase): database is SqlBridge<unknown, unknown> {
  const shape = database as Partial<SqlBridge<unknown, unknown>>;
  return (
    typeof shape.connection === 'function' && typeof shape.transaction === 'function' && 'autocommit' in shape
  );
}

/**
 * Opens transactions on `database` the way `dialect`'s database wants them; a mismatch is refused.
 * On SQLite the relay's statements run in autocommit (see its session) unless `atomic` asks for
 * real transactions (the caller's work spans several statements that must commit together).
 */
export function openOutboxSession<Tx>(
  dialect: SqlDialect<Tx>,
  database: OutboxDatabase,
  atomic = false,
): OutboxSession<Tx> {
  const expect = (ok: boolean, what: string): void => {
    if (!ok) throw new ConfigError('database', `the ${dialect.name} outbox needs ${what}`);
  };
  if (isBridge(database)) {
    expect(database.database === dialect.name, `a bridge to ${dialect.name}, not to ${database.database}`);
    return bridgeSession(database as SqlBridge<unknown, Tx>);
  }
  const sql = outboxSql(dialect.name);
  expect(sql.accepts(database), sql.needs);
  return sql.session(database, atomic) as OutboxSession<Tx>;
}
