import { matchedRows, rows, type MysqlConnectionLike } from './mysql/mysql-client.js';
import type { SqliteDatabaseLike } from './sqlite/sqlite-ledger.js';

/** The part of a pg `Client`, `PoolClient` or `Pool` a transition calls. */
export interface PgQueryableLike {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: unknown[] }>;
}

/** A value bound in a transition: a status, an id or a `set` value. */
export type TransitionValue = string | number | bigint | boolean | null | Date | Buffer;

/** How one database runs the two statements of a transition. */
export interface TransitionDialect {
  readonly quote: (name: string) => string;
  /** Placeholder of the n-th bound value (1-based). */
  placeholder(n: number): string;
  /** Appended to the status read so that it sees the latest committed row, not a stale snapshot. */
  readonly lockingRead: string;
  update(sql: string, values: TransitionValue[]): Promise<number>;
  select(sql: string, values: TransitionValue[]): Promise<readonly Record<string, unknown>[]>;
}

export function sqliteDialect(db: SqliteDatabaseLike): TransitionDialect {
  return {
    quote: (name) => `"${name}"`,
    placeholder: () => '?',
    lockingRead: '',
    update: (sql, values) => Promise.resolve(Number(db.prepare(sql).run(...values).changes)),
    select: (sql, values) => Promise.resolve(db.prepare(sql).all(...values) as Record<string, unknown>[]),
  };
}

export function mysqlDialect(conn: MysqlConnectionLike): TransitionDialect {
  return {
    quote: (name) => `\`${name}\``,
    placeholder: () => '?',
    lockingRead: ' LOCK IN SHARE MODE',
    // matched rows, not changed rows: `set` may write the values the row already has
    update: async (sql, values) => matchedRows((await conn.execute(sql, values))[0]),
    select: async (sql, values) => rows<Record<string, unknown>>((await conn.execute(sql, values))[0]),
  };
}

export function pgDialect(client: PgQueryableLike): TransitionDialect {
  return {
    quote: (name) => `"${name}"`,
    placeholder: (n) => `$${n}`,
    lockingRead: ' FOR SHARE',
    update: async (sql, values) => (await client.query(sql, values)).rowCount ?? 0,
    select: async (sql, values) => (await client.query(sql, values)).rows as Record<string, unknown>[],
  };
}

/**
 * Picks the dialect from what the client can do: a better-sqlite3 database prepares statements
 * synchronously, a mysql2 connection has `execute`, a pg client only `query`.
 */
export function detectDialect(client: unknown): TransitionDialect | undefined {
  const shape = client as { prepare?: unknown; exec?: unknown; execute?: unknown; query?: unknown } | null;
  if (shape === null || typeof shape !== 'object') return undefined;
  if (typeof shape.prepare === 'function' && typeof shape.exec === 'function') {
    return sqliteDialect(client as SqliteDatabaseLike);
  }
  if (typeof shape.execute === 'function' && typeof shape.query === 'function') {
    return mysqlDialect(client as MysqlConnectionLike);
  }
  if (typeof shape.query === 'function') return pgDialect(client as PgQueryableLike);
  return undefined;
}
