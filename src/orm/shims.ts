import type { PgClientLike, PgQueryResultLike } from '../ledger/postgres/postgres-client.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';

/** Runs one statement with `$n` placeholders through a tool; answers pg's result shape. */
export type PgRun = (text: string, values: readonly unknown[]) => Promise<PgQueryResultLike>;

/**
 * A pg-shaped client over a tool's raw-query call, for a ledger's statements: the statement's text
 * and values pass as they are (a name for a prepared statement is a pg client's optimisation, left
 * out here).
 */
export function pgShim(run: PgRun): PgClientLike {
  const client: PgClientLike = {
    query(statement: string | { readonly text: string; readonly values?: unknown[] }, values?: unknown[]) {
      return typeof statement === 'string'
        ? run(statement, values ?? [])
        : run(statement.text, statement.values ?? []);
    },
  };
  return client;
}

/**
 * A statement with PostgreSQL's `$n` placeholders rewritten for a tool that binds `?` in order (Knex,
 * MikroORM): each `$n` becomes `?` with its value at that position (a value used twice is bound
 * twice), and a `?` of the text is escaped so that it is not taken for a placeholder.
 */
export function questionMarks(
  text: string,
  values: readonly unknown[],
): { readonly sql: string; readonly bindings: unknown[] } {
  const bindings: unknown[] = [];
  const sql = text.replace(/\?|\$(\d+)/g, (match, n: string | undefined) => {
    if (n === undefined) return '\\?';
    bindings.push(values[Number(n) - 1] ?? null);
    return '?';
  });
  return { sql, bindings };
}

/** Runs one statement through a tool, with `?` bindings when given; answers mysql2's `[result, fields]`. */
export type MysqlRun = (sql: string, values?: readonly unknown[]) => Promise<readonly [unknown, unknown]>;

/**
 * A mysql2-shaped connection over a tool's raw-query call, for a ledger's statements: `query` runs
 * a text as it is (no bindings), `execute` with `?` bindings.
 */
export function mysqlShim(run: MysqlRun): MysqlConnectionLike {
  return {
    query: (sql) => run(sql),
    execute: (sql, values) => run(sql, values ?? []),
  };
}
