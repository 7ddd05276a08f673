import { createHash } from 'node:crypto';
import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError, LeaseLostError, LedgerUnavailableError } from '../../core/errors.js';
import {
  DEFAULT_LEDGER_CAPABILITIES,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type Ledger,
  type LedgerCapabilities,
  type LedgerRecord,
  type ListQuery,
  type MaintenanceLock,
  type PurgeOptions,
  type PurgeResult,
  type TransactionWork,
  type BatchWork,
} from '../ledger.js';
import {
  columnText,
  header,
  matchedRows,
  MAX_MYSQL_TABLE_LENGTH,
  mysqlIdentifier,
  rows,
  wrapMysqlError,
  type MysqlConnectionLike,
  type MysqlPoolLike,
  type MysqlValue,
} from './mysql-client.js';
import {
  MYSQL_GROUP_BYTES,
  MYSQL_KEY_BYTES,
  mysqlListQuery,
  runMysqlMigrations,
  mysqlStatements,
  strictStatement,
  type MysqlStatements,
} from './mysql-schema.js';
import { wonClaims } from '../batch-claim.js';
import { claimBatchOnMysql, fillTwins, finishBatchOnMysql } from './mysql-batch-claim.js';
import { checkBytes, claimOnMysql, toRecord, type Row } from './mysql-claim.js';
import { takeMysqlUserLock, takeMysqlUserLockFromPool } from './mysql-maintenance-lock.js';
import { runClaimTransaction } from './mysql-transaction.js';
import { isWon, MAX_REMARK_LENGTH } from '../ledger.js';

export interface MysqlLedgerConfig<Conn extends MysqlConnectionLike = MysqlConnectionLike> {
  /**
   * The application's mysql2/promise pool: each transactional claim takes a connection, opens the
   * transaction, runs the handler with that connection as `ctx.tx` and commits. Give `pool` or
   * `connection`, not both. @default none
   */
  readonly pool?: MysqlPoolLike<Conn>;
  /**
   * An open connection: a transactional claim joins the transaction already open on it (through a
   * savepoint) or opens one; operations on it run one at a time. @default none
   */
  readonly connection?: Conn;
  /** Database (schema) of the ledger table. @default the connection's current database */
  readonly database?: string;
  /** Ledger table name (at most 57 characters). @default 'oncemq_ledger' */
  readonly table?: string;
  /** How long finished rows are kept. Must outlast the redelivery horizon. @default '7d' */
  readonly retention?: Duration;
  /** Times a claim transaction is run again after a deadlock or a lock-wait timeout. @default 3 */
  readonly lockRetries?: number;
  /** Clock in epoch milliseconds, for leases and timestamps. @default Date.now */
  readonly clock?: () => number;
}

export const DEFAULT_MYSQL_LEDGER_CONFIG = Object.freeze({
  table: 'oncemq_ledger',
  retention: '7d',
  lockRetries: 3,
} as const);

/** Seconds `init()` waits for another process's migration lock. */
const MIGRATION_LOCK_SECONDS = 30;

type Queryable = MysqlConnectionLike | MysqlPoolLike;

/**
 * Ledger in a MySQL 8 or MariaDB 10.6+ database through mysql2/promise. Transactional mode runs the
 * claim and the handler's writes in one InnoDB transaction on the application's pool or connection.
 */
export class MysqlLedger<Conn extends MysqlConnectionLike = MysqlConnectionLike> implements Ledger<Conn> {
  readonly name = 'mysql';
  readonly capabilities: LedgerCapabilities;
  readonly retentionMs: number;
  /** The quoted, possibly database-qualified table name. */
  readonly table: string;

  readonly #pool: MysqlPoolLike<Conn> | undefined;
  readonly #connection: Conn | undefined;
  readonly #tableName: string;
  readonly #database: string | undefined;
  #resolvedDatabase: string | undefined;
  readonly #versions: string;
  readonly #lockRetries: number;
  readonly #clock: () => number;
  #statements: MysqlStatements | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(config: MysqlLedgerConfig<Conn>) {
    if ((config.pool === undefined) === (config.connection === undefined)) {
      throw new ConfigError('pool', 'give either a mysql2/promise pool or an open connection, not both');
    }
    this.#pool = config.pool;
    this.#connection = config.connection;
    this.#tableName = config.table ?? DEFAULT_MYSQL_LEDGER_CONFIG.table;
    const table = mysqlIdentifier(this.#tableName, 'table', MAX_MYSQL_TABLE_LENGTH);
    const versions = mysqlIdentifier(`${this.#tableName}_schema`, 'table');
    this.#database = config.database;
    const prefix = config.database === undefined ? '' : `${mysqlIdentifier(config.database, 'database')}.`;
    this.table = prefix + table;
    this.#versions = prefix + versions;
    this.retentionMs = parseDuration(config.retention ?? DEFAULT_MYSQL_LEDGER_CONFIG.retention, 'retention');
    const retries = config.lockRetries ?? DEFAULT_MYSQL_LEDGER_CONFIG.lockRetries;
    if (!Number.isInteger(retries) || retries < 0 || retries > 100) {
      throw new ConfigError('lockRetries', `must be a whole number from 0 to 100, got ${String(retries)}`);
    }
    this.#lockRetries = retries;
    this.#clock = config.clock ?? Date.now;
    this.capabilities = Object.freeze({
      ...DEFAULT_LEDGER_CAPABILITIES,
      transactional: true,
      inspect: true,
      batchClaim: true,
    });
  }

  /** Name of a server-wide user lock for this ledger table (GET_LOCK names stop at 64 characters). */
  #lockName(purpose: string, database = this.#resolvedDatabase): string {
    if (database === undefined) {
      throw new LedgerUnavailableError('the MySQL ledger is not initialized; call init() first');
    }
    const digest = createHash('sha256')
      .update(`${database}\u0000${this.#tableName}`)
      .digest('hex')
      .slice(0, 40);
    return `oncemq:${purpose}:${digest}`;
  }

  async init(): Promise<void> {
    if (this.#statements !== undefined) return;
    await this.#withConnection(async (conn) => {
      const [versionRows] = await conn.query('SELECT VERSION() AS version, DATABASE() AS db');
      const server = rows<{ version: unknown; db: unknown }>(versionRows)[0];
      const version = columnText(server?.version ?? '');
      // user locks are server-wide: name them after the table's real database, however it was configured
      const database = this.#database ?? (server?.db == null ? '' : columnText(server.db));
      const lockName = this.#lockName('migrate', database);
      const [locked] = await conn.execute('SELECT GET_LOCK(?, ?) AS locked', [
        lockName,
        MIGRATION_LOCK_SECONDS,
      ]);
      if (Number(rows<{ locked: unknown }>(locked)[0]?.locked) !== 1) {
        throw new LedgerUnavailableError(
          `another process held the migration lock of ${this.table} for ${MIGRATION_LOCK_SECONDS}s`,
        );
      }
      try {
        await runMysqlMigrations(conn, this.table, this.#versions, this.#clock);
      } finally {
        await conn.execute('SELECT RELEASE_LOCK(?)', [lockName]);
      }
      const flavor = /mariadb/i.test(version) ? 'mariadb' : 'mysql';
      this.#statements = mysqlStatements(this.table, strictStatement(flavor));
      this.#resolvedDatabase = database;
    }, 'migrating the ledger table');
  }

  #stmts(): MysqlStatements {
    if (this.#statements === undefined) {
      throw new LedgerUnavailableError('the MySQL ledger is not initialized; call init() first');
    }
    return this.#statements;
  }

  /** Runs `fn` alone on the configured connection (one operation at a time on it). */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Runs `fn` with a connection of its own (see #withConnectionRaw), wrapping driver errors. */
  #withConnection<T>(fn: (conn: Conn) => Promise<T>, what: string): Promise<T> {
    return this.#withConnectionRaw(async (conn) => {
      try {
        return await fn(conn);
      } catch (error) {
        throw wrapMysqlError(error, what);
      }
    });
  }

  /** Runs one statement with values on the pool, or alone on the configured connection. */
  async #execute(sql: string, values: MysqlValue[], what: string): Promise<unknown> {
    const target: Queryable = this.#connection ?? (this.#pool as MysqlPoolLike<Conn>);
    const run = async (): Promise<unknown> => {
      try {
        const [result] = await target.execute(sql, values);
        return result;
      } catch (error) {
        throw wrapMysqlError(error, what);
      }
    };
    return this.#connection === undefined ? run() : this.#exclusive(run);
  }

  #claimTransaction<C>(
    claim: (conn: Conn) => Promise<C>,
    won: (claimed: C) => boolean,
    finish: (conn: Conn, claimed: C) => Promise<void>,
  ): Promise<C> {
    const joinable = this.#connection !== undefined;
    return this.#withConnectionRaw((conn) =>
      runClaimTransaction(conn, { joinable, lockRetries: this.#lockRetries, claim, won, finish }),
    );
  }

  transaction(request: ClaimRequest, work: TransactionWork<Conn>): Promise<ClaimResult> {
    const s = this.#stmts();
    return this.#claimTransaction(
      (conn) => claimOnMysql(conn, s, request, 'SUCCESS', true, this.#clock),
      isWon,
      async (conn, claimed) => {
        if (!isWon(claimed)) return;
        const result = await work(conn, claimed.claim);
        if (result === null) return;
        try {
          await conn.execute(s.storeResult, [result, request.group, request.key]);
        } catch (error) {
          throw wrapMysqlError(error, 'storing the result');
        }
      },
    );
  }

  /**
   * Claims a batch with one multi-row insert and one locking read in one transaction, runs `work`
   * once for the won claims, and commits once for the whole batch.
   */
  async transactionMany(
    requests: readonly ClaimRequest[],
    work: BatchWork<Conn>,
  ): Promise<readonly ClaimResult[]> {
    const s = this.#stmts();
    const results = await this.#claimTransaction(
      (conn) => claimBatchOnMysql(conn, s, this.table, requests, this.#clock),
      (claimed) => wonClaims(claimed).length > 0,
      (conn, claimed) => finishBatchOnMysql(conn, s, this.table, requests, claimed, work as BatchWork<never>),
    );
    return fillTwins(requests, results);
  }

  /**
   * Runs `fn` with a connection of its own: one from the pool, or the configured connection, alone.
   * Errors of `fn` pass as they are (a handler's own errors must reach the pipeline unchanged).
   */
  async #withConnectionRaw<T>(fn: (conn: Conn) => Promise<T>): Promise<T> {
    if (this.#connection !== undefined) {
      const conn = this.#connection;
      return this.#exclusive(() => fn(conn));
    }
    const pool = this.#pool as MysqlPoolLike<Conn>;
    let conn: Conn & { release(): void };
    try {
      conn = await pool.getConnection();
    } catch (error) {
      throw wrapMysqlError(error, 'taking a pool connection');
    }
    try {
      return await fn(conn);
    } finally {
      conn.release();
    }
  }

  async recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    checkBytes(request.key, MYSQL_KEY_BYTES, 'key');
    checkBytes(request.group, MYSQL_GROUP_BYTES, 'group');
    const now = this.#clock();
    const text = remark.slice(0, MAX_REMARK_LENGTH);
    await this.#execute(
      this.#stmts().recordFailure,
      [
        request.group,
        request.key,
        request.fingerprint,
        request.brokerId,
        request.topic,
        text,
        now,
        now,
        text,
        now,
      ],
      'recording a failure',
    );
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    if (this.#connection !== undefined) {
      const conn = this.#connection;
      return this.#exclusive(async () => {
        try {
          return await claimOnMysql(conn, this.#stmts(), request, 'PROCESSING', false, this.#clock);
        } catch (error) {
          throw wrapMysqlError(error, 'claiming');
        }
      });
    }
    try {
      return await claimOnMysql(
        this.#pool as MysqlPoolLike<Conn>,
        this.#stmts(),
        request,
        'PROCESSING',
        false,
        this.#clock,
      );
    } catch (error) {
      throw wrapMysqlError(error, 'claiming');
    }
  }

  async #owned(
    claim: Claim,
    sql: string,
    values: MysqlValue[],
    what: string,
    deletes = false,
  ): Promise<void> {
    const result = await this.#execute(sql, values, what);
    const n = deletes ? header(result).affectedRows : matchedRows(result);
    if (n !== 1) throw new LeaseLostError(claim.group, claim.key, claim.attempt);
  }

  async renew(claim: Claim, leaseMs: number): Promise<Claim> {
    const now = this.#clock();
    const leaseUntil = now + leaseMs;
    await this.#owned(
      claim,
      this.#stmts().renew,
      [leaseUntil, now, claim.group, claim.key, claim.owner, claim.attempt],
      'renewing a lease',
    );
    return { ...claim, leaseUntil: new Date(leaseUntil) };
  }

  async complete(claim: Claim, result: string | null): Promise<void> {
    await this.#owned(
      claim,
      this.#stmts().complete,
      [result, this.#clock(), claim.group, claim.key, claim.owner, claim.attempt],
      'completing',
    );
  }

  async fail(claim: Claim, remark: string): Promise<void> {
    await this.#owned(
      claim,
      this.#stmts().fail,
      [remark.slice(0, MAX_REMARK_LENGTH), this.#clock(), claim.group, claim.key, claim.owner, claim.attempt],
      'marking a failure',
    );
  }

  async release(claim: Claim): Promise<void> {
    await this.#owned(
      claim,
      this.#stmts().release,
      [claim.group, claim.key, claim.owner, claim.attempt],
      'releasing',
      true,
    );
  }

  async get(group: string, key: string): Promise<LedgerRecord | undefined> {
    const found = await this.#execute(this.#stmts().select, [group, key], 'reading');
    const row = rows<Row>(found)[0];
    return row === undefined ? undefined : toRecord(row);
  }

  async list(query: ListQuery): Promise<readonly LedgerRecord[]> {
    const { sql, values } = mysqlListQuery(this.#stmts().list, query);
    return rows<Row>(await this.#execute(sql, values, 'listing')).map(toRecord);
  }

  async reset(group: string, key: string, options?: { readonly force?: boolean }): Promise<boolean> {
    const s = this.#stmts();
    const result = await this.#execute(
      options?.force === true ? s.resetForce : s.reset,
      [group, key],
      'resetting',
    );
    return header(result).affectedRows === 1;
  }

  /**
   * GET_LOCK on a connection held until release (a pool connection of its own, or the configured
   * connection, queued behind other operations). The server frees the lock if this process dies.
   */
  tryMaintenanceLock(): Promise<MaintenanceLock | undefined> {
    const name = this.#lockName('maintenance');
    if (this.#connection !== undefined) {
      const conn = this.#connection;
      return takeMysqlUserLock(
        name,
        conn,
        () => undefined,
        (fn) => this.#exclusive(fn),
      );
    }
    return takeMysqlUserLockFromPool(name, this.#pool as MysqlPoolLike<Conn>);
  }

  async purge(options: PurgeOptions): Promise<PurgeResult> {
    const batchSize = options.batchSize ?? 1000;
    if (!Number.isInteger(batchSize) || batchSize < 1)
      throw new ConfigError('batchSize', 'must be a positive integer');
    const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
    const cutoff = options.olderThan.getTime();
    const sql = this.#stmts().purge(batchSize);
    let deleted = 0;
    let batches = 0;
    while (batches < maxBatches) {
      // autocommit: each bounded DELETE is its own short transaction
      const changes = header(await this.#execute(sql, [cutoff], 'purging')).affectedRows;
      batches++;
      deleted += changes;
      if (changes < batchSize) break;
    }
    return { deleted, batches };
  }

  /** Forgets prepared statements; the pool or connection stays open: it is the application's. */
  close(): Promise<void> {
    this.#statements = undefined;
    return Promise.resolve();
  }
}
