import { AsyncLocalStorage } from 'node:async_hooks';
import { ConfigError } from '../core/errors.js';
import { toLogger, type Logger, type LoggerLike } from '../core/logger.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import type { PgClientLike, PgQueryResultLike } from '../ledger/postgres/postgres-client.js';
import { mysqlShim, pgShim, questionMarks } from './shims.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import { toolBridge } from './tool-bridge.js';

/** The part of a Knex instance or transaction oncemq calls: raw statements with `?` bindings. */
export interface KnexQueryableLike {
  /** Runs `sql` with `?` bindings; answers the driver's own result (pg's result object, mysql2's `[result, fields]`). */
  raw(sql: string, bindings?: readonly unknown[]): PromiseLike<unknown>;
}

/** The part of a Knex transaction (`trx`) oncemq calls. */
export interface KnexTransactionLike extends KnexQueryableLike {
  /** `true` on a transaction, absent on the knex instance. */
  readonly isTransaction?: boolean;
}

/** What Knex's `query` event tells of a statement. */
export interface KnexQueryEventLike {
  /** The pooled connection the statement ran on. */
  readonly __knexUid?: unknown;
  /** The statement's text. */
  readonly sql?: unknown;
  /** The query builder's method (`insert`, `update`, `del`, `select`, `raw`…). */
  readonly method?: unknown;
}

/** The part of a Knex instance oncemq calls. */
export interface KnexLike<Tx extends KnexTransactionLike = KnexTransactionLike> extends KnexQueryableLike {
  /** Runs `work` in a transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (trx: Tx) => Promise<T>): Promise<T>;
  /** Knex's client, which names the database it talks to. */
  readonly client: {
    /** Knex's dialect name (`postgresql`, `mysql`…). */
    readonly dialect?: unknown;
    /** The driver package (`pg`, `mysql2`…). */
    readonly driverName?: unknown;
  };
  /** Knex's events: `query` is watched for writes that escape the claim's transaction. */
  on?(event: 'query', listener: (query: KnexQueryEventLike) => void): unknown;
}

/** Options of {@link knexBridge}. */
export interface KnexBridgeOptions {
  /**
   * Where a write that escaped the claim's transaction is reported (a statement the handler ran
   * through the knex instance, or another connection, while its claim's transaction was open).
   * @default the default logger
   */
  readonly logger?: LoggerLike;
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
      `Knex dialect ${JSON.stringify(name)} has no oncemq ledger through Knex; use pg, mysql2 or better-sqlite3 ` +
        '(better-sqlite3 takes no bridge: knexLedger(knex), and a better-sqlite3 Database of its own for the relay)',
    );
  }
  return database;
}

/** Refuses what is not a Knex transaction: writes through the knex instance would escape the claim's transaction. */
function checkTransaction<Tx extends KnexTransactionLike>(trx: Tx): Tx {
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
  return mysqlShim(async (sql, values) => (await target.raw(sql, values)) as readonly [unknown, unknown]);
}

/** Statements that change data or schema: what escaping the claim's transaction matters for. */
const WRITE = /^\s*(?:insert|update|delete|del|replace|merge|upsert|truncate|create|alter|drop)\b/i;

/** A claim's transaction being watched: the connection its statements run on, once seen. */
interface Watch {
  connection: unknown;
  warned: boolean;
}

/**
 * Reports a write that runs on another connection than the claim's while its transaction is open, in
 * the same asynchronous context (the handler's): Knex's `query` event names each statement's
 * connection, and the first statement of the context is the ledger's own claim, through the `trx`.
 * One warning per transaction. A nested `trx.transaction()` is a savepoint on the same connection,
 * and is not reported.
 */
function watchEscapes(knex: KnexLike, logger: Logger): AsyncLocalStorage<Watch> | undefined {
  if (typeof knex.on !== 'function') return undefined;
  const watches = new AsyncLocalStorage<Watch>();
  knex.on('query', (query) => {
    const watch = watches.getStore();
    if (watch === undefined) return;
    if (watch.connection === undefined) {
      watch.connection = query.__knexUid;
      return;
    }
    const sql = typeof query.sql === 'string' ? query.sql : '';
    const method = typeof query.method === 'string' ? query.method : '';
    if (query.__knexUid === watch.connection || watch.warned || !WRITE.test(`${method} ${sql}`.trim()))
      return;
    watch.warned = true;
    logger.warn(
      "oncemq: a write ran on another connection than the claim's transaction, while the handler ran: it " +
        'commits on its own and a redelivery will apply it again; write through ctx.tx (checkRollback in oncemq/testing finds this)',
      { sql: sql.slice(0, 200) },
    );
  });
  return watches;
}

/**
 * The bridge of a Knex instance on PostgreSQL (pg) or MySQL/MariaDB (mysql2): transactions open with
 * `knex.transaction()`, the handler gets the `trx`, and the ledger's statements run on it through
 * `trx.raw()`. Each transaction's connection shim is made once and kept with it. A write the handler
 * runs through the knex instance instead of the `trx` is reported to the logger.
 */
export function knexBridge<Tx extends KnexTransactionLike>(
  knex: KnexLike<Tx>,
  options: KnexBridgeOptions = {},
): SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> {
  const database = knexDatabase(knex);
  const watches = watchEscapes(knex, toLogger(options.logger));
  const over = database === 'postgres' ? pgOver : mysqlOver;
  return toolBridge<Tx, Tx>({
    database,
    autocommit: over(knex),
    open: (work) =>
      knex.transaction((trx) =>
        watches === undefined
          ? work(trx)
          : watches.run({ connection: undefined, warned: false }, () => work(trx)),
      ),
    transactionOf: checkTransaction,
    over: (trx) => over(trx),
  });
}
