import { createHash } from 'node:crypto';
import { ConfigError, errorText, LedgerUnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { answerTwins, planBatch, wonClaims } from '../batch-claim.js';
import {
  isWon,
  type BatchWork,
  type ClaimRequest,
  type ClaimResult,
  type LedgerRecord,
  type ListQuery,
  type MaintenanceLock,
  type PurgeOptions,
  type PurgeResult,
  type ResetOptions,
  type TransactionWork,
} from '../ledger.js';
import type { LedgerBackend, LedgerInspection, TransactionalClaims } from '../ledger-backend.js';
import { columnText, type LedgerRow } from '../ledger-row.js';
import { purgeInBatches } from '../purge-batches.js';
import { unreachableLedger } from '../ledger-errors.js';
import { checkSchemaVersion } from '../schema-version.js';
import { SqlLeases } from '../sql-leases.js';
import { claimBatchOnMysql, finishBatchOnMysql, type MysqlBatchContext } from './mysql-batch-claim.js';
import { claimOnMysql, mysqlRecord } from './mysql-claim.js';
import {
  header,
  matchedRows,
  rows,
  type MysqlConnectionLike,
  type MysqlPoolLike,
  type MysqlValue,
} from './mysql-client.js';
import { mysqlDialect } from './mysql-dialect.js';
import { takeMysqlUserLock, takeMysqlUserLockFromPool } from './mysql-maintenance-lock.js';
import { purgeMysqlBatch } from './mysql-purge.js';
import {
  mysqlListQuery,
  mysqlMigrations,
  mysqlSchemaVersion,
  mysqlStatements,
  runMysqlMigrations,
  strictStatement,
  type MysqlStatements,
} from './mysql-schema.js';
import { runClaimTransaction } from './mysql-transaction.js';
import { bridgedDialect, holdConnection, pinConnection, type SqlBridge } from '../sql-bridge.js';
import type { SqlDialect } from '../sql-dialect.js';

/** Seconds `init()` waits for another process's migration lock. */
const MIGRATION_LOCK_SECONDS = 30;

/** What the MySQL backend is built from: the ledger's configuration, checked. */
export interface MysqlBackendSettings<Conn extends MysqlConnectionLike, Tx> {
  readonly pool: MysqlPoolLike<Conn> | undefined;
  readonly connection: Conn | undefined;
  /** The caller's transaction `connection` is inside, handed to the work (`connection` itself when undefined). */
  readonly joinedTx: Tx | undefined;
  /** Transactions opened through the application's ORM or query builder instead of the pool. */
  readonly bridge: SqlBridge<MysqlConnectionLike, Tx> | undefined;
  /** The table's name as configured, and its database when one was named. */
  readonly tableName: string;
  readonly database: string | undefined;
  /** The quoted, possibly database-qualified names of the table and its version table. */
  readonly table: string;
  readonly versions: string;
  readonly retentionMs: number;
  readonly lockRetries: number;
  readonly migrate: boolean;
  readonly clock: () => number;
  readonly logger: Logger;
}

/**
 * The options a mysql2 pool or connection was made with: a promise pool's `pool.config.connectionConfig`,
 * a callback pool's `config.connectionConfig`, a promise connection's `connection.config`, a callback
 * connection's `config`; empty for any other client.
 */
function mysqlConnectionConfig(target: unknown): Record<string, unknown> {
  type Config = { connectionConfig?: Record<string, unknown> } & Record<string, unknown>;
  const shape = target as
    { pool?: { config?: Config }; connection?: { config?: Config }; config?: Config } | undefined;
  return (
    shape?.pool?.config?.connectionConfig ??
    shape?.config?.connectionConfig ??
    shape?.connection?.config ??
    shape?.config ??
    {}
  );
}

/**
 * The MySQL/MariaDB ledger's backend: statements on the application's pool (a connection of its own
 * per transaction), or one at a time on the application's connection.
 */
export class MysqlBackend<Conn extends MysqlConnectionLike, Tx = Conn>
  implements LedgerBackend<Tx>, TransactionalClaims<Tx>, LedgerInspection
{
  readonly name = 'mysql';
  readonly retentionMs: number;
  readonly dialect: SqlDialect<Tx>;
  readonly transactional = this;
  readonly leased: SqlLeases<number>;
  readonly inspect = this;

  readonly #settings: MysqlBackendSettings<Conn, Tx>;
  readonly #clock: () => number;
  #statements: MysqlStatements | undefined;
  /** The database the table lives in, read at open() when none was configured. */
  #database: string | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(settings: MysqlBackendSettings<Conn, Tx>) {
    this.#settings = settings;
    this.dialect =
      settings.bridge === undefined
        ? (mysqlDialect as unknown as SqlDialect<Tx>)
        : bridgedDialect(mysqlDialect, settings.bridge);
    this.retentionMs = settings.retentionMs;
    this.#clock = settings.clock;
    this.leased = new SqlLeases(
      (request) =>
        this.#onConnection((db) => claimOnMysql(db, this.#s, request, 'PROCESSING', false, this.#clock)),
      async (statement, values) =>
        matchedRows(await this.#execute(this.#s.owned[statement], values as MysqlValue[])),
      this.#clock,
      (ms) => ms,
    );
  }

  get #s(): MysqlStatements {
    if (this.#statements === undefined) throw new LedgerUnavailableError('the MySQL ledger is not open');
    return this.#statements;
  }

  /** Name of a server-wide user lock for this ledger table (GET_LOCK names stop at 64 characters). */
  #lockName(purpose: string, database = this.#database): string {
    const digest = createHash('sha256')
      .update(`${database ?? ''}\u0000${this.#settings.tableName}`)
      .digest('hex')
      .slice(0, 40);
    return `oncemq:${purpose}:${digest}`;
  }

  async open(): Promise<void> {
    try {
      await this.#open();
    } catch (error) {
      throw unreachableLedger('MySQL', this.#url(), error) ?? error;
    }
  }

  /** Where the ledger connects, for messages: what its pool or connection was given. */
  #url(): string | undefined {
    const { host, port, database } = mysqlConnectionConfig(this.#settings.pool ?? this.#settings.connection);
    if (typeof host !== 'string') return undefined;
    return `mysql://${host}:${typeof port === 'number' ? port : 3306}/${typeof database === 'string' ? database : ''}`;
  }

  async #open(): Promise<void> {
    await this.#withConnection(async (conn) => {
      const [versionRows] = await conn.query('SELECT VERSION() AS version, DATABASE() AS db');
      const server = rows<{ version: unknown; db: unknown }>(versionRows)[0];
      // user locks are server-wide: name them after the table's real database, however it was configured
      const database = this.#settings.database ?? (server?.db == null ? undefined : columnText(server.db));
      if (this.#settings.migrate) await this.#migrate(conn, database);
      else await this.#check(conn, database);
      const flavor = /mariadb/i.test(columnText(server?.version ?? '')) ? 'mariadb' : 'mysql';
      this.#statements = mysqlStatements(this.#settings.table, strictStatement(flavor));
      this.#database = database;
    });
  }

  async #migrate(conn: Conn, database: string | undefined): Promise<void> {
    const lockName = this.#lockName('migrate', database);
    const [locked] = await conn.execute('SELECT GET_LOCK(?, ?) AS locked', [
      lockName,
      MIGRATION_LOCK_SECONDS,
    ]);
    if (Number(rows<{ locked: unknown }>(locked)[0]?.locked) !== 1) {
      throw new LedgerUnavailableError(
        `another process held the migration lock of ${this.#settings.table} for ${MIGRATION_LOCK_SECONDS}s`,
      );
    }
    try {
      await runMysqlMigrations(conn, this.#settings.table, this.#settings.versions, this.#clock);
    } finally {
      await conn.execute('SELECT RELEASE_LOCK(?)', [lockName]);
    }
  }

  /** A ledger that does not migrate: the database, the table and its version must already be there. */
  async #check(conn: Conn, database: string | undefined): Promise<void> {
    const { tableName, table, versions } = this.#settings;
    if (database === undefined) {
      throw new ConfigError(
        'database',
        'no database is selected: name one in the connection URL or with `database`',
      );
    }
    const fix = `oncemq migrate --store mysql --database ${database} --table ${tableName}`;
    const found = await mysqlSchemaVersion(conn, database, tableName, versions);
    if (!found.database) {
      throw new ConfigError(
        'database',
        `the database ${database} does not exist; create it, then run \`${fix}\``,
      );
    }
    checkSchemaVersion(found.version, mysqlMigrations(table).length, `\`${database}\`.\`${tableName}\``, fix);
  }

  /** The pool and the connection are the application's: nothing to end. */
  close(): Promise<void> {
    this.#statements = undefined;
    return Promise.resolve();
  }

  /** Runs `fn` alone on the configured connection (one operation at a time on it). */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Runs `fn` on the pool (or the bridge's autocommit statements), or alone on the configured connection. */
  #onConnection<T>(fn: (db: MysqlConnectionLike | MysqlPoolLike) => Promise<T>): Promise<T> {
    const { connection, bridge } = this.#settings;
    if (connection !== undefined) return this.#exclusive(() => fn(connection));
    if (bridge !== undefined) return fn(bridge.autocommit);
    return fn(this.#settings.pool as MysqlPoolLike<Conn>);
  }

  /** Runs one statement with values on the pool, or alone on the configured connection. */
  #execute(sql: string, values: MysqlValue[]): Promise<unknown> {
    return this.#onConnection(async (db) => (await db.execute(sql, values))[0]);
  }

  /** Runs `fn` with a connection of its own: one from the pool, or the configured connection, alone. */
  async #withConnection<T>(fn: (conn: Conn) => Promise<T>): Promise<T> {
    const { connection, bridge } = this.#settings;
    if (connection !== undefined) return this.#exclusive(() => fn(connection));
    // a tool hands out one connection only inside a transaction of its own (held for the migration lock)
    if (bridge !== undefined) return holdConnection(bridge, (conn) => fn(conn as Conn));
    const conn = await (this.#settings.pool as MysqlPoolLike<Conn>).getConnection();
    try {
      return await fn(conn);
    } finally {
      conn.release();
    }
  }

  /**
   * Runs a claim transaction: on a pool connection of its own, on the configured connection (joining
   * its transaction), or — with a bridge — under a savepoint of a transaction opened through the
   * application's tool, which commits it. `finish` gets the transaction handed to the caller's work.
   */
  #claimTransaction<C, R>(
    claim: (conn: Conn, nested: boolean) => Promise<C>,
    won: (claimed: C) => boolean,
    finish: (conn: Conn, claimed: C, nested: boolean, tx: Tx) => Promise<R>,
    lost: (claimed: C) => R,
  ): Promise<R> {
    const { connection, lockRetries, logger, bridge, joinedTx } = this.#settings;
    const onRetry = (error: unknown, round: number): void => {
      logger.debug('oncemq: claim transaction hit a lock conflict; running it again', {
        ledger: this.name,
        round,
        error: errorText(error),
      });
    };
    const run = (conn: Conn, tx: Tx, inTransaction: boolean): Promise<R> =>
      runClaimTransaction(conn, {
        joinable: connection !== undefined,
        inTransaction,
        lockRetries,
        claim,
        won,
        finish: (c, claimed, nested) => finish(c, claimed, nested, tx),
        lost,
        onRetry,
      });
    if (connection === undefined && bridge !== undefined) {
      return bridge.transaction((conn, tx) => run(conn as Conn, tx, true));
    }
    return this.#withConnection((conn) =>
      run(conn, joinedTx ?? (conn as unknown as Tx), joinedTx !== undefined),
    );
  }

  transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult> {
    const s = this.#s;
    return this.#claimTransaction(
      (conn) => claimOnMysql(conn, s, request, 'SUCCESS', true, this.#clock),
      isWon,
      async (conn, claimed, _nested, tx) => {
        if (!isWon(claimed)) return claimed;
        const result = await work(tx, claimed.claim);
        if (result !== null) await conn.execute(s.storeResult, [result, request.group, request.key]);
        return claimed;
      },
      (claimed) => claimed,
    );
  }

  /**
   * Claims a batch with one multi-row insert and one read in one transaction, runs `work` once for
   * the won claims, and commits once for the whole batch.
   */
  batchClaim(requests: readonly ClaimRequest[], work: BatchWork<Tx>): Promise<readonly ClaimResult[]> {
    const context = (nested: boolean): MysqlBatchContext => ({
      s: this.#s,
      table: this.#settings.table,
      clock: this.#clock,
      nested,
    });
    const plan = planBatch(requests);
    return this.#claimTransaction(
      (conn, nested) => claimBatchOnMysql(conn, requests, plan, context(nested)),
      (claimed) => wonClaims(claimed).length > 0,
      (conn, claimed, nested, tx) =>
        finishBatchOnMysql(conn, requests, plan, claimed, (_, won) => work(tx, won), context(nested)),
      (claimed) => answerTwins(plan, requests, claimed, () => undefined, this.#clock()),
    );
  }

  async recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    const now = this.#clock();
    const { group, key, fingerprint, brokerId, topic } = request;
    const values = [group, key, fingerprint, brokerId, topic, remark, now, now, remark, now];
    await this.#execute(this.#s.recordFailure, values);
  }

  async get(group: string, key: string): Promise<LedgerRecord | undefined> {
    const row = rows<LedgerRow>(await this.#execute(this.#s.select, [group, key]))[0];
    return row === undefined ? undefined : mysqlRecord(row);
  }

  async list(query: ListQuery): Promise<readonly LedgerRecord[]> {
    const { sql, values } = mysqlListQuery(this.#s.list, query);
    return rows<LedgerRow>(await this.#execute(sql, values)).map(mysqlRecord);
  }

  async reset(group: string, key: string, options: ResetOptions): Promise<boolean> {
    const s = this.#s;
    const result = await this.#execute(options.force === true ? s.resetForce : s.reset, [group, key]);
    return header(result).affectedRows === 1;
  }

  /**
   * GET_LOCK on a connection held until release (a pool connection of its own, or the configured
   * connection, queued behind other operations). The server frees the lock if this process dies.
   */
  maintenanceLock(): Promise<MaintenanceLock | undefined> {
    const name = this.#lockName('maintenance');
    const { connection, bridge } = this.#settings;
    // a tool hands out a connection only inside a transaction: the lock's is held open until release
    if (connection === undefined && bridge !== undefined) {
      return takeMysqlUserLockFromPool(name, {
        ...bridge.autocommit,
        getConnection: () => pinConnection(bridge),
      });
    }
    if (connection === undefined)
      return takeMysqlUserLockFromPool(name, this.#settings.pool as MysqlPoolLike<Conn>);
    return takeMysqlUserLock(
      name,
      connection,
      () => undefined,
      (fn) => this.#exclusive(fn),
    );
  }

  /** Batches of a key read, then DELETEs by primary key, each autocommit (mysql-purge.ts). */
  purge(options: Required<PurgeOptions>): Promise<PurgeResult> {
    const execute = (sql: string, values: MysqlValue[]): Promise<unknown> => this.#execute(sql, values);
    const cutoff = options.olderThan.getTime();
    return purgeInBatches(options, () => purgeMysqlBatch(execute, this.#s.purge, cutoff, options.batchSize));
  }
}
