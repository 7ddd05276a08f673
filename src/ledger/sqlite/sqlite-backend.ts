import { LedgerUnavailableError } from '../../core/errors.js';
import { CLAIM_RACE_ATTEMPTS } from '../claim-decision.js';
import { ClaimRound, lostEveryRound } from '../claim-round.js';
import { wonClaims } from '../batch-claim.js';
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
import type { SqliteDatabaseLike, SqliteHandle } from './sqlite-database.js';
import { sqliteDialect, sqliteDialectOver } from './sqlite-dialect.js';
import type { SqlDialect } from '../sql-dialect.js';
import { sqliteListQuery, takeSqliteMaintenanceLock } from './sqlite-inspection.js';
import { prepareStatements, type Statements } from './sqlite-ledger-sql.js';
import { checkSqliteSchema, migrateSqlite, openSqliteFile, type SqliteFileOptions } from './sqlite-open.js';

/** What the SQLite backend is built from: the ledger's configuration, checked. */
export interface SqliteBackendSettings<Db extends SqliteDatabaseLike, Tx> {
  readonly database: Db | string;
  /** What the work receives instead of the database itself. */
  readonly handle: SqliteHandle<Db, Tx> | undefined;
  readonly table: string;
  readonly retentionMs: number;
  readonly clock: () => number;
  readonly migrate: boolean;
  readonly file: Omit<SqliteFileOptions, 'mustExist'>;
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
  readonly leased: SqlLeases<number>;
  readonly inspect = this;

  readonly #settings: SqliteBackendSettings<Db, Tx>;
  readonly #clock: () => number;
  readonly #queue = new ConnectionQueue();
  #db: Db | undefined;
  #statements: Statements | undefined;

  constructor(settings: SqliteBackendSettings<Db, Tx>) {
    this.#settings = settings;
    const handle = settings.handle;
    this.dialect =
      handle === undefined
        ? (sqliteDialect as unknown as SqlDialect<Tx>)
        : sqliteDialectOver((tx: Tx) => handle.database(tx));
    this.retentionMs = settings.retentionMs;
    this.#clock = settings.clock;
    const database = settings.database;
    if (typeof database !== 'string') this.#db = database;
    const inMemory = typeof database === 'string' ? database === ':memory:' : database.memory === true;
    this.traits = { concurrentConnections: !inMemory };
    this.leased = new SqlLeases(
      (request) => this.#queue.run(() => this.#claim(request, 'PROCESSING')),
      (statement, values) =>
        this.#queue.run(() => Number(this.#stmts.owned[statement].run(...values).changes)),
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
    const { database, table, migrate, file } = this.#settings;
    this.#db ??= (await openSqliteFile(database as string, { ...file, mustExist: !migrate })) as Db;
    const db = this.#db;
    await this.#queue.run(() => {
      if (migrate) migrateSqlite(db, table, this.#clock);
      else checkSqliteSchema(db, table, file.fix);
    });
    this.#statements = prepareStatements(db, table);
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

  /** Claims one key: an insert, else decideExisting() on the row, which may take a failed or expired one over. */
  #claim(request: ClaimRequest, status: 'PROCESSING' | 'SUCCESS'): ClaimResult {
    const s = this.#stmts;
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

  /** Begins a transaction, or a savepoint inside one the caller already has open on the database. */
  #begin(s: Statements): { readonly commit: () => void; readonly rollback: () => void } {
    const db = this.db;
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
   * anything that throws (or a claim not to proceed with) rolls back.
   */
  #inTransaction<C, W, R>(
    claim: (s: Statements) => C,
    proceed: (claimed: C) => boolean,
    work: (tx: Tx, claimed: C) => W | Promise<W>,
    finish: (s: Statements, claimed: C, out: W) => R,
    skipped: (claimed: C) => R,
  ): Promise<R> {
    return this.#queue.run(() => {
      const s = this.#stmts;
      const db = this.db;
      const { commit, rollback } = this.#begin(s);
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
      const tx = this.#settings.handle?.of(db) ?? (db as unknown as Tx);
      return settle(() => work(tx, claimed), done, rollback);
    });
  }

  transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult> {
    return this.#inTransaction(
      () => this.#claim(request, 'SUCCESS'),
      isWon,
      (tx, claimed) => work(tx, (claimed as WonClaim).claim),
      (s, claimed, result) => {
        if (result !== null) s.storeResult.run(result, request.group, request.key);
        return claimed;
      },
      (claimed) => claimed,
    );
  }

  /**
   * Claims a batch with multi-row `INSERT … ON CONFLICT DO NOTHING RETURNING` in one transaction and
   * runs `work` once for the won claims: one commit for the whole batch.
   */
  batchClaim(requests: readonly ClaimRequest[], work: BatchWork<Tx>): Promise<readonly ClaimResult[]> {
    const now = this.#clock();
    return this.#inTransaction(
      (s) => claimBatchOnSqlite(s, requests, now),
      () => true,
      (tx, results) => work(tx, wonClaims(results)),
      (s, results, stored) => finishBatchOnSqlite(s, requests, results, wonClaims(results), stored, now),
      () => [],
    );
  }

  recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    return this.#queue.run(() => {
      const now = this.#clock();
      this.#stmts.recordFailure.run(
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
    return this.#queue.run(() => sqliteRecord(this.#stmts, group, key));
  }

  purge(options: Required<PurgeOptions>): Promise<PurgeResult> {
    const cutoff = options.olderThan.getTime();
    return purgeInBatches(
      options,
      () => this.#queue.run(() => Number(this.#stmts.purge.run(cutoff, options.batchSize).changes)),
      () => new Promise<void>((resolve) => setImmediate(resolve)),
    );
  }

  list(query: ListQuery): Promise<readonly LedgerRecord[]> {
    const { sql, values } = sqliteListQuery(this.#settings.table, query);
    return this.#queue.run(() =>
      (this.db.prepare(sql).all(...values) as LedgerRow[]).map((row) => rowToRecord(row, EPOCH_MS_COLUMNS)),
    );
  }

  reset(group: string, key: string, options: ResetOptions): Promise<boolean> {
    return this.#queue.run(() => {
      const s = this.#stmts;
      return Number((options.force === true ? s.resetForce : s.reset).run(group, key).changes) === 1;
    });
  }

  /** A lease row in `<table>_lock`, renewed while held, so processes sharing the file take turns. */
  maintenanceLock(): Promise<MaintenanceLock | undefined> {
    return takeSqliteMaintenanceLock(this.#settings.table, this.#clock, (fn) =>
      this.#queue.run(() => {
        const db = this.db;
        return fn({ run: (sql, ...params) => Number(db.prepare(sql).run(...params).changes) });
      }),
    );
  }
}
