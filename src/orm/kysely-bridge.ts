// The only module that loads Kysely at run time, and only through the oncemq/kysely entry, which
// Kysely users import: Kysely is a peer dependency, so this is the application's own copy.
// CompiledQuery.raw makes a plain frozen object (no class identity), so even a second copy would do.
import { CompiledQuery } from 'kysely';
import { ConfigError } from '../core/errors.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import type { PgClientLike, PgQueryResultLike } from '../ledger/postgres/postgres-client.js';
import { mysqlShim, pgShim } from './shims.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import { toolBridge } from './tool-bridge.js';

/** What Kysely answers for a statement (`QueryResult`). */
export interface KyselyQueryResultLike {
  /** The rows a read answered; empty for a write. */
  readonly rows: unknown[];
  /** Rows an INSERT, UPDATE or DELETE affected; absent for a read. */
  readonly numAffectedRows?: bigint;
  /** MySQL: the OK packet's insert id, absent when it is 0. */
  readonly insertId?: bigint;
}

/** The part of a Kysely instance or transaction oncemq calls. */
export interface KyselyQueryableLike {
  /** Runs a statement; oncemq passes `CompiledQuery.raw(sql, parameters)`, the SQL going to the driver as it is. */
  executeQuery(query: CompiledQuery): Promise<KyselyQueryResultLike>;
  /** The same instance or transaction without its plugins (a CamelCasePlugin would rename the ledger's columns). */
  withoutPlugins(): KyselyQueryableLike;
  /** `true` on a transaction, `false` on the Kysely instance. */
  readonly isTransaction: boolean;
}

/** The part of a Kysely transaction (`trx`, a `Transaction<DB>`) oncemq calls. */
export type KyselyTransactionLike = KyselyQueryableLike;

/** The part of a Kysely instance (`Kysely<DB>`) oncemq calls. */
export interface KyselyLike<
  Tx extends KyselyTransactionLike = KyselyTransactionLike,
> extends KyselyQueryableLike {
  /** Kysely's transaction builder (`db.transaction()`). */
  transaction(): {
    /** Runs `work` in a new transaction: committed when it resolves, rolled back when it throws. */
    execute<T>(work: (trx: Tx) => Promise<T>): Promise<T>;
  };
}

/** The query builder, only to see which SQL the instance writes. */
interface KyselyProbeLike {
  selectFrom(table: string): {
    selectAll(): { where(column: string, op: string, value: unknown): { compile(): { sql: string } } };
  };
}

/** The SQL `db`'s dialect writes for a probe query (compiled, not run); empty for what is not a Kysely instance. */
export function kyselyProbeSql(db: KyselyQueryableLike): string {
  try {
    const probe = db.withoutPlugins() as unknown as KyselyProbeLike;
    return probe.selectFrom('oncemq_probe').selectAll().where('k', '=', 0).compile().sql;
  } catch {
    return '';
  }
}

/**
 * Which database `db` talks to, told by the SQL its dialect writes for a probe query (compiled, not
 * run): `"t"` and `$1` on PostgreSQL, `` `t` `` and `?` on MySQL/MariaDB. Any other dialect is refused.
 */
export function kyselyDatabase(db: KyselyQueryableLike): 'postgres' | 'mysql' {
  const sql = kyselyProbeSql(db);
  if (sql.includes('"oncemq_probe"') && sql.endsWith('$1')) return 'postgres';
  if (sql.includes('`oncemq_probe`') && sql.endsWith('?')) return 'mysql';
  throw new ConfigError(
    'db',
    `this Kysely dialect (it writes ${JSON.stringify(sql)}) has no oncemq ledger through Kysely; use ` +
      'PostgresDialect or MysqlDialect (SQLite takes no bridge: kyselyLedger(db, { database }), and a ' +
      'better-sqlite3 Database of its own for the relay)',
  );
}

/** Refuses what is not a Kysely transaction: writes through the Kysely instance would escape the claim's transaction. */
function checkTransaction<Tx extends object>(trx: Tx): Tx {
  if ((trx as { isTransaction?: unknown } | null)?.isTransaction !== true) {
    throw new ConfigError(
      'tx',
      'expected a Kysely transaction (the `trx` of db.transaction().execute(), or ctx.tx), not the Kysely ' +
        'instance: its writes would run on another connection, outside the claim’s transaction',
    );
  }
  return trx;
}

function pgOver(target: KyselyQueryableLike): PgClientLike {
  const plain = target.withoutPlugins();
  return pgShim(async (text, values): Promise<PgQueryResultLike> => {
    const result = await plain.executeQuery(CompiledQuery.raw(text, [...values]));
    const { rows, numAffectedRows } = result;
    return { rows, rowCount: numAffectedRows === undefined ? rows.length : Number(numAffectedRows) };
  });
}

/**
 * A mysql2-shaped connection: a write answers an OK packet made from Kysely's result (`affectedRows`
 * — matched rows for an UPDATE under mysql2's default CLIENT_FOUND_ROWS — and `insertId`, 0 when
 * Kysely leaves it out); a read answers its rows. The server status is not in Kysely's result, and a
 * bridged ledger never asks for it: it knows when it runs inside a transaction.
 */
function mysqlOver(target: KyselyQueryableLike): MysqlConnectionLike {
  const plain = target.withoutPlugins();
  const run = async (sql: string, values: readonly unknown[]): Promise<readonly [unknown, unknown]> => {
    const result = await plain.executeQuery(CompiledQuery.raw(sql, [...values]));
    if (result.numAffectedRows === undefined) return [result.rows, undefined];
    const ok = {
      affectedRows: Number(result.numAffectedRows),
      insertId: Number(result.insertId ?? 0n),
    };
    return [ok, undefined];
  };
  return mysqlShim((sql, values) => run(sql, values ?? []));
}

/**
 * The bridge of a Kysely instance on PostgreSQL (PostgresDialect) or MySQL/MariaDB (MysqlDialect):
 * transactions open with `db.transaction().execute()`, the handler gets the `trx`, and the ledger's
 * statements run on it as `CompiledQuery.raw(sql, parameters)`, without the instance's plugins. Each
 * transaction's connection shim is made once and kept with it.
 */
export function kyselyBridge<Tx extends KyselyTransactionLike>(
  db: KyselyLike<Tx>,
): SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> {
  if ((db as { isTransaction?: unknown }).isTransaction === true) {
    throw new ConfigError(
      'db',
      'expected the Kysely instance, not a transaction: to claim inside a transaction of yours, ' +
        'build the ledger on the instance and call ledger.join(trx)',
    );
  }
  const database = kyselyDatabase(db);
  const over = database === 'postgres' ? pgOver : mysqlOver;
  return toolBridge<Tx, Tx>({
    database,
    autocommit: over(db),
    open: (work) => db.transaction().execute(work),
    transactionOf: checkTransaction,
    over: (trx) => over(trx),
  });
}
