import type { SqlDialect, SqlValue } from '../sql-dialect.js';
import { quoteIdentifier } from '../sql-identifier.js';
import type { PgClientLike } from './postgres-client.js';

/** PostgreSQL through pg: `ctx.tx` is a client (a pool works outside a transaction), `$n` placeholders. */
export const postgresDialect: SqlDialect<PgClientLike> = Object.freeze({
  name: 'postgres',
  lockingRead: ' FOR SHARE',
  quote: quoteIdentifier,
  placeholder: (n: number) => `$${n}`,
  execute: async (client: PgClientLike, sql: string, values: readonly SqlValue[]) =>
    (await client.query(sql, [...values])).rowCount ?? 0,
  query: async (client: PgClientLike, sql: string, values: readonly SqlValue[]) =>
    (await client.query(sql, [...values])).rows as Record<string, unknown>[],
});
