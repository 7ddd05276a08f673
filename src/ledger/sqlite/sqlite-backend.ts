import { LedgerUnavailableError } from '../../core/errors.js';
import { CLAIM_RACE_ATTEMPTS } from '../claim-decision.js';
import { ClaimRound, lostEveryRound } from '../claim-round.js';
import { planBatch, wonClaims } from '../batch-claim.js';
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
  type WonClaim,
} from '../ledger.js';
import type { LedgerBackend, LedgerInspection, TransactionalClaims } from '../ledger-backend.js';
import { EPOCH_MS_COLUMNS, rowToRecord, type LedgerRow } from '../ledger-row.js';
import { purgeInBatches } from '../purge-batches.js';
import { SqlLeases } from '../sql-leases.js';
import { ConnectionQueue, settle } from './connection-queue.js';
import { claimBatchOnSqlite, finishBatchOnSqlite, sqliteRecord } from './sqlite-batch-claim.js';
import type { SqliteConnectionSource } from './sqlite-connection-source.js';
import type { SqliteDatabaseLike, SqliteHandle } from './sqlite-database.js';
import { sqliteDialect, sqliteDialectOver } from './sqlite-dialect.js';
import type { SqlDialect } from '../sql-dialect.js';
import { sqliteListQuery, takeSqliteMaintenanceLock } from './sqlite-inspection.js';
import { prepareStatements, type Statements } from './sqlite-ledger-sql.js';
import { waitForWriteLock, withoutBusyWait } from './sqlite-write-lock.js';
import { checkSqliteSchema, migrateSqlite, openSqliteFile, type SqliteFileOptions } from './sqlite-open.js';

/** What the SQLite backend is built from: the ledger's configuration, checked. */
export interface SqliteBackendSettings<Db extends SqliteDatabaseLike, Tx> {
  /** The database or a path to open; unused when `source` lends the connection. */
  readonly database: Db | string | undefined;
  /** What the work receives instead of the database itself. */
  readonly handle: SqliteHandle<Db, Tx> | undefined;
  /** An ORM that owns the connection and lends it, transactions included (instead of `database` and `handle`). */
  readonly source?: SqliteConnectionSource<Db, Tx>;
  /** False for a ledger joined to a caller's transaction: a lease must be visible before it ends. @default true */
  readonly leased?: boolean;
  readonly table: string;
  readonly retentionMs: number;
  readonly clock: () => number;
  readonly migrate: boolean;
  readonly file: Omit<SqliteFileOptions, 'mustExist'>;
}

/** The steps of one transactional claim (single or batch). */
interface TransactionSteps<Tx, C, W, R> {
  readonly claim: (s: Statements) => C;
  readonly proceed: (claimed: C) => boolean;
  readonly work: (tx: Tx, claimed: C) => W | Promise<W>;
  readonly finish: (s: Statements, claimed: C, out: W) => R;
  readonly skipped: (claimed: C) => R;
}

/**
 * The SQLite ledger's backend. One connection runs one operation at a time (a transaction whose
 * handler awaits holds it until it settles); synchronous operations run without waiting a turn.
 */
export class SqliteBackend<Db extends SqliteDatabaseLike, Tx = Db>
  implements LedgerBackend<Tx>, TransactionalClaims<Tx>, LedgerInspection
{
  readonly name = 'sqlite';
  readonly retentionMs: number;
  readonly traits: { readonly concurrentConnections: boolean };
  readonly dialect: SqlDialect<Tx>;
  readonly transactional = this;
  readonly leased: SqlLeases<number> | undefined;
  readonly inspect = this;

  readonly #settings: SqliteBackendSettings<Db, Tx>;
  readonly #clock: () => number;
  readonly #queue: ConnectionQueue;
  /** The open database: the one given or opened, or the connection a source lent last. */
  #db: Db | undefined;
  /** The ledger's statements, prepared on `#db`. */
  #statements: Statements | undefined;

  constructor(settings: SqliteBackendSettings<Db, Tx>) {
    this.#settings = settings;
    const { handle, source, database } = settings;
    this.dialect =
      source !== undefined
        ? sqliteDialectOver((tx: Tx) => source.database(tx))
        : handle === undefined
          ? (sqliteDialect as unknown as SqlDialect<Tx>)
          : sqliteDialectOver((tx: Tx) => handle.database(tx));
    this.retentionMs = settings.retentionMs;
    this.#clock = settings.clock;
    this.#queue = source?.queue ?? new ConnectionQueue();
    if (typeof database === 'object') this.#db = database;
    const inMemory =
      source !== undefined
        ? source.memory
        : typeof database === 'string'
          ? database === ':memory:'
          : database?.memory === true;
    this.traits = { concurrentConnections: !inMemory };
    this.leased =
      settings.leased === false
        ? undefined
        : new SqlLeases(
            (request) => this.#use((s) => this.#claim(s, request, 'PROCESSING')),
            (statement, values) => this.#use((s) => Number(s.owned[statement].run(...values).changes)),
            this.#clock,
            (ms) => ms,
          );
  }

  /** The open database. */
  get db(): Db {
    if (this.#db === undefined) {
      throw new LedgerUnavailableError('the SQLite ledger is not open; call init() first');
    }
    return this.#db;
  }

  get #stmts(): Statements {
    if (this.#statements === undefined) {
      throw new LedgerUnavailableError('the SQLite ledger is not open; call init() first');
    }
    return this.#statements;
  }

  async open(): Promise<void> {
    const { database, table, migrate, file, source } = this.#settings;
    const prepare = (db: Db): void => {
      if (migrate) migrateSqlite(db, table, this.#clock);
      else checkSqliteSchema(db, table, file.fix);
      this.#db = db;
      this.#statements = prepareStatements(db, table);
    };
    if (source !== undefined) {
      await this.#queue.run(() => this.#lent(source, prepare));
      return;
    }
    const db =
      this.#db ?? ((await openSqliteFile(database as string, { ...file, mustExist: !migrate })) as Db);
    this.#db = db;
    await this.#queue.run(() => prepare(db));
  }

  async close(): Promise<void> {
    await this.#queue.run(() => {
      this.#statements = undefined;
      if (typeof this.#settings.database === 'string' && this.#db !== undefined) {
        this.#db.close();
        this.#db = undefined;
      }
    });
  }

  /** The ledger's statements on `db`, prepared again when a source lent another connection than the last one. */
  #statementsOf(db: Db): Statements {
    const statements = this.#stmts;
    if (db === this.#db) return statements;
    this.#db = db;
    this.#statements = prepareStatements(db, this.#settings.table);
    return this.#statements;
  }

  /** Runs `fn` on the connection, its turn taken (and lent by the source, if any), outside a transaction. */
  #use<T>(fn: (s: Statements, db: Db) => T): Promise<T> {
    const source = this.#settings.source;
    return this.#queue.run(() =>
      source === undefined
        ? fn(this.#stmts, this.db)
        : this.#lent(source, (db) => fn(this.#statementsOf(db), db)),
    );
  }

  /**
   * Runs `fn` on the connection `source` lends, outside a claim's transaction. `fn` is one synchronous
   * piece of work that completes, or changes nothing when a statement finds another connection's write
   * lock held (one write, or migrations in a transaction of their own), so it is run again whole after
   * a pause of the event loop instead of waiting in place: a holder of the lock in this process (a
   * transaction of the tool's whose handler awaits) could never let go of it while the thread waits.
   */
  #lent<T>(source: SqliteConnectionSource<Db, Tx>, fn: (db: Db) => T): Promise<T> {
    return waitForWriteLock(() => source.hold((db) => withoutBusyWait(db, () => fn(db))));
  }

  /** Claims one key: an insert, else decideExisting() on the row, which may take a failed or expired one over. */
  #claim(s: Statements, request: ClaimRequest, status: 'PROCESSING' | 'SUCCESS'): ClaimResult {
    let record: LedgerRecord | undefined;
    for (let i = 0; i < CLAIM_RACE_ATTEMPTS; i++) {
      const round = new ClaimRound(request, status, this.#clock());
      if (Number(s.insert.run(...round.insertValues()).changes) === 1) return round.acquired();
      record = sqliteRecord(s, request.group, request.key);
      if (record === undefined) continue;
      const answer = round.existing(record);
      if (answer !== undefined) return answer;
      if (Number(s.reclaim.run(...round.reclaimValues(record)).changes) === 1) return round.reclaimed(record);
    }
    return lostEveryRound(request, record);
  }

  /** Begins a transaction, or a savepoint inside one the caller (or the source) already has open on `db`. */
  #begin(db: Db, s: Statements): { readonly commit: () => void; readonly rollback: () => void } {
    const nested = db.inTransaction;
    (nested ? s.savepoint : s.begin).run();
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

  /**
   * Runs `claim` inside a transaction, then `work` when `proceed` says so, then `finish` and commit;
   * anything that throws (or a claim not to proceed with) rolls back. With a source, the transaction is
   * the source's (the ORM's) and the steps run under a savepoint of it.
   */
  #inTransaction<C, W, R>(steps: TransactionSteps<Tx, C, W, R>): Promise<R> {
    const source = this.#settings.source;
    return this.#queue.run(() => {
      if (source !== undefined) {
        // the ORM's transaction awaits between BEGIN and COMMIT: wait for another connection's write lock
        // between tries, never in place (that would hold the thread the lock's holder may need)
        return waitForWriteLock(() =>
          source.transaction(async (db, tx) =>
            this.#claimIn(db, this.#statementsOf(db), tx, {
              ...steps,
              claim: (s) => withoutBusyWait(db, () => steps.claim(s)),
            }),
          ),
        );
      }
      const db = this.db;
      return this.#claimIn(db, this.#stmts, this.#settings.handle?.of(db) ?? (db as unknown as Tx), steps);
    });
  }

  /** The steps of {@link #inTransaction} on `db`, `tx` handed to the work. */
  #claimIn<C, W, R>(
    db: Db,
    s: Statements,
    tx: Tx,
    { claim, proceed, work, finish, skipped }: TransactionSteps<Tx, C, W, R>,
  ): R | Promise<R> {
    const { commit, rollback } = this.#begin(db, s);
    let claimed: C;
    try {
      claimed = claim(s);
    } catch (error) {
      rollback();
      throw error;
    }
    if (!proceed(claimed)) {
      rollback();
      return skipped(claimed);
    }
    const done = (out: W): R => {
      try {
        const answer = finish(s, claimed, out);
        commit();
        return answer;
      } catch (error) {
        rollback();
        throw error;
      }
    };
    return settle(() => work(tx, claimed), done, rollback);
  }

  transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult> {
    return this.#inTransaction({
      claim: (s) => this.#claim(s, request, 'SUCCESS'),
      proceed: isWon,
      work: (tx, claimed) => work(tx, (claimed as WonClaim).claim),
      finish: (s, claimed, result) => {
        if (result !== null) s.storeResult.run(result, request.group, request.key);
        return claimed;
      },
      skipped: (claimed) => claimed,
    });
  }

  /**
   * Claims a batch with multi-row `INSERT … ON CONFLICT DO NOTHING RETURNING` in one transaction and
   * runs `work` once for the won claims: one commit for the whole batch.
   */
  batchClaim(requests: readonly ClaimRequest[], work: BatchWork<Tx>): Promise<readonly ClaimResult[]> {
    const now = this.#clock();
    const plan = planBatch(requests);
    return this.#inTransaction({
      claim: (s) => claimBatchOnSqlite(s, requests, plan, now),
      proceed: () => true,
      work: (tx, results) => work(tx, wonClaims(results)),
      finish: (s, results, stored) =>
        finishBatchOnSqlite(s, requests, plan, results, wonClaims(results), stored, now),
      skipped: () => [],
    });
  }

  recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    return this.#use((s) => {
      const now = this.#clock();
      s.recordFailure.run(
        request.group,
        request.key,
        request.fingerprint,
        request.brokerId,
        request.topic,
        remark,
        now,
        now,
      );
    });
  }

  get(group: string, key: string): Promise<LedgerRecord | undefined> {
    return this.#use((s) => sqliteRecord(s, group, key));
  }

  purge(options: Required<PurgeOptions>): Promise<PurgeResult> {
    const cutoff = options.olderThan.getTime();
    return purgeInBatches(
      options,
      () => this.#use((s) => Number(s.purge.run(cutoff, options.batchSize).changes)),
      () => new Promise<void>((resolve) => setImmediate(resolve)),
    );
  }

  list(query: ListQuery): Promise<readonly LedgerRecord[]> {
    const { sql, values } = sqliteListQuery(this.#settings.table, query);
    return this.#use((_, db) =>
      (db.prepare(sql).all(...values) as LedgerRow[]).map((row) => rowToRecord(row, EPOCH_MS_COLUMNS)),
    );
  }

  reset(group: string, key: string, options: ResetOptions): Promise<boolean> {
    return this.#use((s) => {
      return Number((options.force === true ? s.resetForce : s.reset).run(group, key).changes) === 1;
    });
  }

  /** A lease row in `<table>_lock`, renewed while held, so processes sharing the file take turns. */
  maintenanceLock(): Promise<MaintenanceLock | undefined> {
    return takeSqliteMaintenanceLock(this.#settings.table, this.#clock, (fn) =>
      this.#use((_, db) => fn({ run: (sql, ...params) => Number(db.prepare(sql).run(...params).changes) })),
    );
  }
}
