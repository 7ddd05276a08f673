import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError, LeaseLostError, LedgerUnavailableError } from '../../core/errors.js';
import { CLAIM_RACE_ATTEMPTS } from '../claim-decision.js';
import { ClaimRound, lostEveryRound } from '../claim-round.js';
import { wonClaims } from '../batch-claim.js';
import {
  DEFAULT_LEDGER_CAPABILITIES,
  isWon,
  MAX_REMARK_LENGTH,
  type Claim,
  type ClaimRequest,
  type ClaimResult,
  type Ledger,
  type LedgerCapabilities,
  type LedgerRecord,
  type PurgeOptions,
  type PurgeResult,
  type TransactionWork,
  type BatchWork,
  type ListQuery,
  type MaintenanceLock,
} from '../ledger.js';
import { quoteIdentifier, sqlIdentifier } from '../sql-identifier.js';
import { ConnectionQueue, settle } from './connection-queue.js';
import { SQLITE_BATCH_INSERT_ROWS, claimBatchOnSqlite, finishBatchOnSqlite } from './sqlite-batch-claim.js';
import { sqliteListQuery, sqliteResetSql, takeSqliteMaintenanceLock } from './sqlite-inspection.js';
import {
  migrations,
  prepareStatements,
  toRecord,
  type SqliteLedgerRow as Row,
  type Statements,
} from './sqlite-ledger-sql.js';

/** The part of a better-sqlite3 statement oncemq calls. */
export interface SqliteStatementLike {
  run(...params: unknown[]): { changes: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** The part of a better-sqlite3 `Database` oncemq calls. */
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  exec(sql: string): unknown;
  readonly inTransaction: boolean;
  readonly memory?: boolean;
  close(): unknown;
}

export interface SqliteLedgerConfig<Db extends SqliteDatabaseLike = SqliteDatabaseLike> {
  /**
   * The database: an open better-sqlite3 `Database` (the handler's writes through `ctx.tx` then share
   * the claim's transaction), or a file path that oncemq opens (`:memory:` for a private in-memory one).
   */
  readonly database: Db | string;
  /** Ledger table name. @default 'oncemq_ledger' */
  readonly table?: string;
  /** How long finished rows are kept. Must outlast the redelivery horizon. @default '7d' */
  readonly retention?: Duration;
  /** How long to wait for another process's write lock (only for a database oncemq opens). @default '5s' */
  readonly busyTimeout?: Duration;
  /**
   * `synchronous` pragma for a database oncemq opens. `full` makes every commit durable before the
   * message is acked; `normal` may lose the last commits on power loss (while the broker thinks they
   * were processed). @default 'full'
   */
  readonly synchronous?: 'full' | 'normal';
  /** Clock in epoch milliseconds, for leases and timestamps. @default Date.now */
  readonly clock?: () => number;
}

export const DEFAULT_SQLITE_LEDGER_CONFIG = Object.freeze({
  table: 'oncemq_ledger',
  retention: '7d',
  busyTimeout: '5s',
  synchronous: 'full',
} as const);

/**
 * Ledger in a SQLite database through better-sqlite3. Transactional mode shares one local
 * transaction between the claim and the handler's writes (`ctx.tx` is the database).
 *
 * One connection runs one transaction at a time: while a transactional handler awaits, other
 * operations on the same ledger wait their turn. Processes sharing a file serialize on SQLite's
 * write lock (`BEGIN IMMEDIATE`, with the busy timeout).
 */
export class SqliteLedger<Db extends SqliteDatabaseLike = SqliteDatabaseLike> implements Ledger<Db> {
  readonly name = 'sqlite';
  readonly capabilities: LedgerCapabilities;
  readonly retentionMs: number;
  readonly table: string;

  /** Rows per multi-row INSERT of a batch claim (8 bound values each, well under SQLite's limit). */
  static readonly BATCH_INSERT_ROWS = SQLITE_BATCH_INSERT_ROWS;

  readonly #config: SqliteLedgerConfig<Db>;
  readonly #clock: () => number;
  readonly #ownsDatabase: boolean;
  #db: Db | undefined;
  #statements: Statements | undefined;
  readonly #queue = new ConnectionQueue();

  constructor(config: SqliteLedgerConfig<Db>) {
    const database = config.database as unknown;
    if (typeof database !== 'string' && (typeof database !== 'object' || database === null)) {
      throw new ConfigError('database', 'expected a better-sqlite3 Database or a file path');
    }
    this.#config = config;
    this.table = sqlIdentifier(config.table ?? DEFAULT_SQLITE_LEDGER_CONFIG.table, 'table');
    this.retentionMs = parseDuration(config.retention ?? DEFAULT_SQLITE_LEDGER_CONFIG.retention, 'retention');
    this.#clock = config.clock ?? Date.now;
    this.#ownsDatabase = typeof config.database === 'string';
    const inMemory =
      typeof config.database === 'string' ? config.database === ':memory:' : config.database.memory === true;
    this.capabilities = Object.freeze({
      ...DEFAULT_LEDGER_CAPABILITIES,
      transactional: true,
      concurrentConnections: !inMemory,
      batchClaim: true,
      inspect: true,
    });
    if (typeof config.database !== 'string') this.#db = config.database;
  }

  /** The database the ledger lives in (opened by {@link init} when a path was given). */
  get database(): Db {
    if (this.#db === undefined)
      throw new LedgerUnavailableError('the SQLite ledger is not initialized; call init() first');
    return this.#db;
  }

  async init(): Promise<void> {
    if (this.#statements !== undefined) return;
    if (this.#db === undefined) {
      const path = this.#config.database as string;
      let Database: new (path: string) => SqliteDatabaseLike;
      try {
        const module = (await import('better-sqlite3')) as unknown as {
          default: new (path: string) => SqliteDatabaseLike;
        };
        Database = module.default;
      } catch (error) {
        throw new ConfigError(
          'database',
          'opening a SQLite file needs the better-sqlite3 package (npm install better-sqlite3@12)',
          {
            cause: error,
          },
        );
      }
      const db = this.#wrap(() => new Database(path), `opening ${path}`);
      const busyTimeout = parseDuration(
        this.#config.busyTimeout ?? DEFAULT_SQLITE_LEDGER_CONFIG.busyTimeout,
        'busyTimeout',
      );
      const synchronous = this.#config.synchronous ?? DEFAULT_SQLITE_LEDGER_CONFIG.synchronous;
      if (!(['full', 'normal'] as unknown[]).includes(synchronous)) {
        throw new ConfigError(
          'synchronous',
          `expected 'full' or 'normal', got ${JSON.stringify(synchronous)}`,
        );
      }
      db.exec(`PRAGMA busy_timeout = ${Math.round(busyTimeout)}`);
      db.exec('PRAGMA journal_mode = WAL');
      db.exec(`PRAGMA synchronous = ${synchronous.toUpperCase()}`);
      this.#db = db as Db;
    }
    const db = this.#db;
    await this.#exclusive(() => {
      this.#wrap(() => {
        this.#migrate(db);
      }, 'migrating the ledger table');
    });
    this.#statements = prepareStatements(db, this.table);
  }

  #migrate(db: SqliteDatabaseLike): void {
    const versions = quoteIdentifier(`${this.table}_schema`);
    db.exec('BEGIN IMMEDIATE');
    try {
      db.exec(
        `CREATE TABLE IF NOT EXISTS ${versions} (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
      );
      const row = db.prepare(`SELECT MAX(version) AS version FROM ${versions}`).get() as {
        version: number | null;
      };
      const current = row.version ?? 0;
      const steps = migrations(this.table);
      for (let version = current + 1; version <= steps.length; version++) {
        db.exec(steps[version - 1] ?? '');
        db.prepare(`INSERT INTO ${versions} (version, applied_at) VALUES (?, ?)`).run(version, this.#clock());
      }
      db.exec('COMMIT');
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
  }

  #stmts(): Statements {
    if (this.#statements === undefined) {
      throw new LedgerUnavailableError('the SQLite ledger is not initialized; call init() first');
    }
    return this.#statements;
  }

  /** Runs ledger statements, turning driver failures into LedgerUnavailableError. */
  #wrap<T>(fn: () => T, what: string): T {
    try {
      return fn();
    } catch (error) {
      if (error instanceof LeaseLostError || error instanceof ConfigError) throw error;
      throw new LedgerUnavailableError(`SQLite ledger failed ${what}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  /** Gives the connection to one operation at a time; synchronous work runs without waiting when free. */
  #exclusive<T>(fn: () => T | Promise<T>): Promise<T> {
    return this.#queue.run(fn);
  }

  /** Claims one key: an insert, else decideExisting() on the row, which may take a failed or expired one over. */
  #claimSync(request: ClaimRequest, status: 'PROCESSING' | 'SUCCESS'): ClaimResult {
    const s = this.#stmts();
    let record: LedgerRecord | undefined;
    for (let i = 0; i < CLAIM_RACE_ATTEMPTS; i++) {
      const round = new ClaimRound(request, status, this.#clock());
      if (Number(s.insert.run(...round.insertValues()).changes) === 1) return round.acquired();
      const row = s.select.get(request.group, request.key) as Row | undefined;
      if (row === undefined) continue;
      record = toRecord(row);
      const answer = round.existing(record);
      if (answer !== undefined) return answer;
      if (Number(s.reclaim.run(...round.reclaimValues(record)).changes) === 1) return round.reclaimed(record);
    }
    return lostEveryRound(request, record);
  }

  claim(request: ClaimRequest): Promise<ClaimResult> {
    return this.#exclusive(() => this.#wrap(() => this.#claimSync(request, 'PROCESSING'), 'claiming'));
  }

  /** Begins a transaction, or a savepoint inside one the caller already has open on the database. */
  #begin(s: Statements): { readonly commit: () => void; readonly rollback: () => void } {
    const db = this.database;
    const nested = db.inTransaction;
    this.#wrap(() => (nested ? s.savepoint : s.begin).run(), 'beginning a transaction');
    return {
      commit: () => {
        (nested ? s.releaseSavepoint : s.commit).run();
      },
      rollback: () => {
        if (!db.inTransaction) return;
        if (nested) {
          s.rollbackSavepoint.run();
          s.releaseSavepoint.run();
        } else {
          s.rollback.run();
        }
      },
    };
  }

  transaction(request: ClaimRequest, work: TransactionWork<Db>): Promise<ClaimResult> {
    return this.#exclusive(() => {
      const s = this.#stmts();
      const db = this.database;
      const { commit, rollback } = this.#begin(s);
      let claimed: ClaimResult;
      try {
        claimed = this.#wrap(() => this.#claimSync(request, 'SUCCESS'), 'claiming');
      } catch (error) {
        rollback();
        throw error;
      }
      if (!isWon(claimed)) {
        rollback();
        return claimed;
      }
      const claim = claimed.claim;
      const finish = (result: string | null): ClaimResult => {
        try {
          if (result !== null) {
            this.#wrap(() => s.storeResult.run(result, request.group, request.key), 'storing the result');
          }
          this.#wrap(commit, 'committing');
        } catch (error) {
          rollback();
          throw error;
        }
        return claimed;
      };
      return settle(() => work(db, claim), finish, rollback);
    });
  }

  /**
   * Claims a batch with multi-row `INSERT … ON CONFLICT DO NOTHING RETURNING` in one transaction and
   * runs `work` once for the won claims: one commit for the whole batch.
   */
  transactionMany(requests: readonly ClaimRequest[], work: BatchWork<Db>): Promise<readonly ClaimResult[]> {
    return this.#exclusive(() => {
      const s = this.#stmts();
      const db = this.database;
      const { commit, rollback } = this.#begin(s);
      let results: (ClaimResult | undefined)[];
      try {
        results = this.#wrap(() => claimBatchOnSqlite(s, requests, this.#clock()), 'claiming a batch');
      } catch (error) {
        rollback();
        throw error;
      }
      const won = wonClaims(results);
      const finish = (out: unknown): readonly ClaimResult[] => {
        try {
          return this.#wrap(() => {
            const answers = finishBatchOnSqlite(s, requests, results, won, out);
            commit();
            return answers;
          }, 'committing a batch');
        } catch (error) {
          rollback();
          throw error;
        }
      };
      return settle(() => work(db, won), finish, rollback);
    });
  }

  recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    return this.#exclusive(() => {
      const now = this.#clock();
      this.#wrap(
        () =>
          this.#stmts().recordFailure.run(
            request.group,
            request.key,
            request.fingerprint,
            request.brokerId,
            request.topic,
            remark.slice(0, MAX_REMARK_LENGTH),
            now,
            now,
          ),
        'recording a failure',
      );
    });
  }

  #owned(
    claim: Claim,
    what: string,
    run: (s: Statements, now: number) => { changes: number | bigint },
  ): Promise<number> {
    return this.#exclusive(() => {
      const now = this.#clock();
      const changed = this.#wrap(() => run(this.#stmts(), now), what);
      if (Number(changed.changes) !== 1) throw new LeaseLostError(claim.group, claim.key, claim.attempt);
      return now;
    });
  }

  async renew(claim: Claim, leaseMs: number): Promise<Claim> {
    let leaseUntil = 0;
    await this.#owned(claim, 'renewing a lease', (s, now) => {
      leaseUntil = now + leaseMs;
      return s.renew.run(leaseUntil, now, claim.group, claim.key, claim.owner, claim.attempt);
    });
    return { ...claim, leaseUntil: new Date(leaseUntil) };
  }

  async complete(claim: Claim, result: string | null): Promise<void> {
    await this.#owned(claim, 'completing', (s, now) =>
      s.complete.run(result, now, claim.group, claim.key, claim.owner, claim.attempt),
    );
  }

  async fail(claim: Claim, remark: string): Promise<void> {
    await this.#owned(claim, 'marking a failure', (s, now) =>
      s.fail.run(remark.slice(0, MAX_REMARK_LENGTH), now, claim.group, claim.key, claim.owner, claim.attempt),
    );
  }

  async release(claim: Claim): Promise<void> {
    await this.#owned(claim, 'releasing', (s) =>
      s.release.run(claim.group, claim.key, claim.owner, claim.attempt),
    );
  }

  get(group: string, key: string): Promise<LedgerRecord | undefined> {
    return this.#exclusive(() => {
      const row = this.#wrap(() => this.#stmts().select.get(group, key), 'reading') as Row | undefined;
      return row === undefined ? undefined : toRecord(row);
    });
  }

  async purge(options: PurgeOptions): Promise<PurgeResult> {
    const batchSize = options.batchSize ?? 1000;
    if (!Number.isInteger(batchSize) || batchSize < 1)
      throw new ConfigError('batchSize', 'must be a positive integer');
    const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
    const cutoff = options.olderThan.getTime();
    let deleted = 0;
    let batches = 0;
    while (batches < maxBatches) {
      const changes = await this.#exclusive(() =>
        Number(this.#wrap(() => this.#stmts().purge.run(cutoff, batchSize), 'purging').changes),
      );
      batches++;
      deleted += changes;
      if (changes < batchSize) break;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return { deleted, batches };
  }

  list(query: ListQuery): Promise<readonly LedgerRecord[]> {
    const { sql, values } = sqliteListQuery(this.table, query);
    return this.#exclusive(() => {
      this.#stmts();
      const found = this.#wrap(() => this.database.prepare(sql).all(...values), 'listing') as Row[];
      return found.map(toRecord);
    });
  }

  reset(group: string, key: string, options?: { readonly force?: boolean }): Promise<boolean> {
    const sql = sqliteResetSql(this.table, options?.force === true);
    return this.#exclusive(() => {
      this.#stmts();
      return Number(this.#wrap(() => this.database.prepare(sql).run(group, key), 'resetting').changes) === 1;
    });
  }

  /** A lease row in `<table>_lock`, renewed while held, so processes sharing the file take turns. */
  tryMaintenanceLock(): Promise<MaintenanceLock | undefined> {
    return takeSqliteMaintenanceLock(this.table, this.#clock, (fn) =>
      this.#exclusive(() => {
        this.#stmts();
        const db = this.database;
        return this.#wrap(
          () => fn({ run: (sql, ...params) => Number(db.prepare(sql).run(...params).changes) }),
          'taking the maintenance lock',
        );
      }),
    );
  }

  async close(): Promise<void> {
    await this.#exclusive(() => {
      this.#statements = undefined;
      if (this.#ownsDatabase && this.#db !== undefined) {
        this.#db.close();
        this.#db = undefined;
      }
    });
  }
}
