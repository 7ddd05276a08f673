import type { SqlDialect, SqlValue } from '../sql-dialect.js';
import { matchedRows, rows, type MysqlConnectionLike } from './mysql-client.js';

/** The part of a mysql2/promise connection or pool the dialect calls. */
export type MysqlExecutorLike = Pick<MysqlConnectionLike, 'execute'>;

/**
 * MySQL and MariaDB through mysql2/promise: `ctx.tx` is a connection (a pool works outside a
 * transaction), `?` placeholders, server-side prepared statements; writes count matched rows.
 */
export const mysqlDialect: SqlDialect<MysqlExecutorLike> = Object.freeze({
  name: 'mysql',
  lockingRead: ' LOCK IN SHARE MODE',
  quote: (identifier: string) => `\`${identifier}\``,
  placeholder: () => '?',
  // matched rows, not changed rows: a write may set the values the row already has
  execute: async (conn: MysqlExecutorLike, sql: string, values: readonly SqlValue[]) =>
    matchedRows((await conn.execute(sql, [...values]))[0]),
  query: async (conn: MysqlExecutorLike, sql: string, values: readonly SqlValue[]) =>
    rows<Record<string, unknown>>((await conn.execute(sql, [...values]))[0]),
});
