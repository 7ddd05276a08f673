import { ConfigError } from '../core/errors.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import type { PgClientLike, PgQueryResultLike } from '../ledger/postgres/postgres-client.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import { pgShim, questionMarks } from './pg-shim.js';

/** The part of a Knex instance or transaction oncemq calls: raw statements with `?` bindings. */
export interface KnexQueryableLike {
  raw(sql: string, bindings?: readonly unknown[]): PromiseLike<unknown>;
}

/** The part of a Knex transaction (`trx`) oncemq calls. */
export interface KnexTransactionLike extends KnexQueryableLike {
  /** `true` on a transaction, absent on the knex instance. */
  readonly isTransaction?: boolean;
}

/** The part of a Knex instance oncemq calls. */
export interface KnexLike<Tx extends KnexTransactionLike = KnexTransactionLike> extends KnexQueryableLike {
  transaction<T>(work: (trx: Tx) => Promise<T>): Promise<T>;
  readonly client: { readonly dialect?: unknown; readonly driverName?: unknown };
}

/** Knex's dialect names of the databases oncemq's ledgers live in. */
const DATABASES: Readonly<Record<string, 'postgres' | 'mysql'>> = {
  postgresql: 'postgres',
  postgres: 'postgres',
  pg: 'postgres',
  mysql: 'mysql',
  mysql2: 'mysql',
};

/** Which database `knex` talks to; a dialect with no oncemq ledger through Knex is refused. */
export function knexDatabase(knex: KnexLike): 'postgres' | 'mysql' {
  const client = knex.client as { dialect?: unknown; driverName?: unknown } | undefined;
  const dialect = client?.dialect ?? client?.driverName;
  const name = typeof dialect === 'string' ? dialect : '';
  const database = DATABASES[name];
  if (database === undefined) {
    throw new ConfigError(
      'knex',
      `Knex dialect ${JSON.stringify(name)} has no oncemq ledger through Knex; use pg or mysql2 ` +
        '(on SQLite, give the better-sqlite3 database to SqliteLedger)',
    );
  }
  return database;
}

/** Refuses what is not a Knex transaction: writes through the knex instance would escape the claim's transaction. */
function checkTransaction(trx: KnexTransactionLike): KnexTransactionLike {
  if ((trx as { isTransaction?: unknown } | null)?.isTransaction !== true) {
    throw new ConfigError(
      'tx',
      'expected a Knex transaction (the `trx` of knex.transaction(), or ctx.tx), not the knex instance: ' +
        'its writes would run on another connection, outside the claim’s transaction',
    );
  }
  return trx;
}

function pgOver(target: KnexQueryableLike): PgClientLike {
  return pgShim(async (text, values) => {
    const { sql, bindings } = questionMarks(text, values);
    return (await target.raw(sql, bindings)) as PgQueryResultLike;
  });
}

function mysqlOver(target: KnexQueryableLike): MysqlConnectionLike {
  return {
    query: async (sql) => (await target.raw(sql)) as readonly [unknown, unknown],
    execute: async (sql, values) => (await target.raw(sql, values ?? [])) as readonly [unknown, unknown],
  };
}

/**
 * The bridge of a Knex instance on PostgreSQL (pg) or MySQL/MariaDB (mysql2): transactions open with
 * `knex.transaction()`, the handler gets the `trx`, and the ledger's statements run on it through
 * `trx.raw()`. Each transaction's connection shim is made once and kept with it.
 */
export function knexBridge<Tx extends KnexTransactionLike>(
  knex: KnexLike<Tx>,
): SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> {
  const database = knexDatabase(knex);
  const over = database === 'postgres' ? pgOver : mysqlOver;
  const shims = new WeakMap<Tx, PgClientLike | MysqlConnectionLike>();
  const connection = (trx: Tx): PgClientLike | MysqlConnectionLike => {
    let shim = shims.get(trx);
    if (shim === undefined) {
      shim = over(checkTransaction(trx));
      shims.set(trx, shim);
    }
    return shim;
  };
  const bridge: SqlBridge<PgClientLike | MysqlConnectionLike, Tx> = {
    database,
    autocommit: over(knex),
    transaction: (work) => knex.transaction((trx) => work(connection(trx), trx)),
    connection,
  };
  return bridge as SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx>;
}
