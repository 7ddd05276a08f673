import { ConfigError } from '../core/errors.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import type { PgClientLike, PgQueryResultLike } from '../ledger/postgres/postgres-client.js';
import { mysqlShim, pgShim, questionMarks } from './shims.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import { toolBridge } from './tool-bridge.js';

/**
 * The part of a MikroORM 6 SQL connection (`em.getConnection()`) oncemq calls: raw statements with
 * `?` placeholders, in the transaction `ctx` when given.
 */
export interface MikroOrmConnectionLike {
  /**
   * Runs `sql`, its `?` placeholders filled with `params` (MikroORM escapes them into the text), in the
   * transaction `ctx` when given: `'all'` answers the driver's rows (on MySQL, the OK packet of a
   * write), `'run'` the affected rows and the returned ones.
   */
  execute(sql: string, params: unknown[], method: 'all' | 'run', ctx?: unknown): Promise<unknown>;
  /**
   * The Knex instance under MikroORM 6's SQL drivers (absent from the type of `@mikro-orm/core`'s
   * EntityManager): its client names the database.
   */
  getKnex?(): {
    /** Knex's client. */
    readonly client: {
      /** Knex's dialect name (`postgresql`, `mysql`). */
      readonly dialect?: unknown;
      /** The driver package (`pg`, `mysql2`, `mariadb`). */
      readonly driverName?: unknown;
    };
  };
}

/** The part of a MikroORM 6 `EntityManager` oncemq calls. */
export interface MikroOrmEntityManagerLike {
  /** The ORM's configuration: on PostgreSQL, its `schema` is the default schema of the entities. */
  readonly config?: {
    /** The `schema` option of the ORM. */
    get(key: 'schema'): unknown;
  };
  /** The connection statements run on (the write connection when there are read replicas). */
  getConnection(): MikroOrmConnectionLike;
  /** A new EntityManager with an empty identity map, outside any transaction. */
  fork(): this;
  /** Runs `work` in a transaction with a fork of its own, flushed before the commit; rolled back when work throws. */
  transactional<T>(work: (em: this) => Promise<T>): Promise<T>;
  /** `true` on the EntityManager a transaction hands its callback (`em.transactional(async (em) => …)`). */
  isInTransaction(): boolean;
  /** The driver's transaction (a Knex transaction in MikroORM 6) the EntityManager's statements run in. */
  getTransactionContext(): unknown;
}

/** Knex's dialect and driver names of the databases oncemq's ledgers live in. */
const DATABASES: Readonly<Record<string, 'postgres' | 'mysql'>> = {
  postgresql: 'postgres',
  pg: 'postgres',
  mysql: 'mysql',
  mysql2: 'mysql',
  mariadb: 'mysql',
};

/** Which database `em` talks to; a driver with no oncemq ledger through MikroORM is refused. */
export function mikroOrmDatabase(em: MikroOrmEntityManagerLike): 'postgres' | 'mysql' {
  let client: { dialect?: unknown; driverName?: unknown } | undefined;
  try {
    client = em.getConnection().getKnex?.().client;
  } catch {
    client = undefined;
  }
  const name = [client?.dialect, client?.driverName].find((n) => typeof n === 'string' && n in DATABASES);
  if (typeof name !== 'string') {
    const seen = typeof client?.dialect === 'string' ? client.dialect : 'unknown';
    throw new ConfigError(
      'em',
      `MikroORM driver ${JSON.stringify(seen)} has no oncemq ledger through MikroORM; use @mikro-orm/postgresql, ` +
        '@mikro-orm/mysql or @mikro-orm/mariadb (version 6) (on SQLite, mikroOrmLedger() takes @mikro-orm/better-sqlite)',
    );
  }
  return DATABASES[name] as 'postgres' | 'mysql';
}

/**
 * The transaction of `em`, the EntityManager of a MikroORM transaction (or `orm.em` inside one:
 * MikroORM resolves it to the transaction's); anything else (`orm.em` or a fork outside a
 * transaction, an EntityManager whose transaction has ended) is refused: its writes would run on
 * another connection, outside the claim's transaction.
 */
function transactionOf(em: MikroOrmEntityManagerLike): object {
  const inTransaction = (em as Partial<MikroOrmEntityManagerLike> | null)?.isInTransaction;
  const ctx =
    typeof inTransaction === 'function' && em.isInTransaction() ? em.getTransactionContext() : undefined;
  // the EntityManager of a committed transaction keeps its (Knex) transaction, completed
  const completed = (ctx as { isCompleted?: () => boolean } | null | undefined)?.isCompleted?.() === true;
  if (ctx === undefined || ctx === null || completed) {
    throw new ConfigError(
      'tx',
      'expected the EntityManager of a MikroORM transaction (the `em` of em.transactional(), or ctx.tx), not ' +
        'orm.em outside a transaction, a fork, nor the EntityManager of a transaction that has ended ' +
        '(or is disableTransactions set?): its writes would run on another connection, outside the claim’s ' +
        'transaction',
    );
  }
  return ctx;
}

/** pg's shape from MikroORM's 'run' answer on PostgreSQL: `{ affectedRows: rowCount, rows }`. */
function pgOver(connection: () => MikroOrmConnectionLike, ctx: unknown): PgClientLike {
  return pgShim(async (text, values) => {
    // MikroORM inlines `?` values into the text, and leaves the text alone (escapes too) without values
    const { sql, bindings } = values.length === 0 ? { sql: text, bindings: [] } : questionMarks(text, values);
    let result = (await connection().execute(sql, bindings, 'run', ctx)) as
      { affectedRows?: number; rows?: unknown[] } | { affectedRows?: number; rows?: unknown[] }[];
    // several statements in one text answer one result each: the last one counts
    if (Array.isArray(result)) result = result[result.length - 1] ?? {};
    const rows = result.rows ?? [];
    const answer: PgQueryResultLike = { rows, rowCount: result.affectedRows ?? rows.length };
    return answer;
  });
}

/** mysql2's shape from MikroORM's 'all' answer on MySQL: the driver's OK packet of a write, or its rows. */
function mysqlOver(connection: () => MikroOrmConnectionLike, ctx: unknown): MysqlConnectionLike {
  return mysqlShim(async (sql, values) => [
    await connection().execute(sql, [...(values ?? [])], 'all', ctx),
    undefined,
  ]);
}

/**
 * The bridge of a MikroORM 6 EntityManager (`orm.em`) on PostgreSQL or MySQL/MariaDB: each
 * transaction opens with `em.fork().transactional()` (a fresh identity map per transaction), the
 * handler gets the transaction's EntityManager, and the ledger's statements run in its transaction
 * through `em.getConnection().execute(sql, params, method, em.getTransactionContext())`.
 */
export function mikroOrmBridge<Em extends MikroOrmEntityManagerLike>(
  em: Em,
): SqlBridge<PgClientLike, Em> | SqlBridge<MysqlConnectionLike, Em> {
  const database = mikroOrmDatabase(em);
  const over = database === 'postgres' ? pgOver : mysqlOver;
  return toolBridge<Em, object>({
    database,
    autocommit: over(() => em.getConnection(), undefined),
    open: (work) => em.fork().transactional(work),
    transactionOf,
    over: (ctx, tx) => over(() => tx.getConnection(), ctx),
  });
}
