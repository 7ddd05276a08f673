import { ConfigError } from '../../core/errors.js';
import { mysqlOutbox } from './mysql-outbox.js';
import type { OutboxSql } from './outbox-sql.js';
import { postgresOutbox } from './postgres-outbox.js';
import { sqliteOutbox } from './sqlite-outbox.js';

const OUTBOX_SQL: Readonly<Record<string, OutboxSql>> = {
  postgres: postgresOutbox,
  mysql: mysqlOutbox,
  sqlite: sqliteOutbox,
};

/** The outbox's SQL on the database a dialect names; an unknown name is refused. */
export function outboxSql(name: string): OutboxSql {
  const sql = Object.hasOwn(OUTBOX_SQL, name) ? OUTBOX_SQL[name] : undefined;
  if (sql === undefined) throw new ConfigError('dialect', `unknown SQL dialect ${JSON.stringify(name)}`);
  return sql;
}
