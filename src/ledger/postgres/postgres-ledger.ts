import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError, LeaseLostError, LedgerUnavailableError, PermanentError } from '../../core/errors.js';
import {
  DEFAULT_LEDGER_CAPABILITIES,
  isWon,
  type BatchWork,
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
} from '../ledger.js';
import { pgClaimMany } from './postgres-batch-claim.js';
import { pgClaimOne } from './postgres-claim.js';
import {
  pgExecute,
  pgFailure,
  pgQuery,
  type PgClientLike,
  type PgPoolLike,
  type PgStatement,
} from './postgres-client.js';
import { pgRecord, pgStatements, type PgLedgerRow, type PgStatements } from './postgres-ledger-sql.js';
import { pgList, pgPurge, pgTryAdvisoryLock } from './postgres-maintenance.js';
import { pgMigrate } from './postgres-migrate.js';
import { dropExpiredPartitions, ensurePartitions, keyLockText } from './postgres-partitions.js';
import { pgSavepoint, pgTransaction } from './postgres-transaction.js';
import { sqlIdentifier } from '../sql-identifier.js';

export interface PostgresLedgerConfig {
  /**
   * The application's pg `Pool`. Each transactional claim checks out a client, opens the
   * transaction, and hands the client to the handler as `ctx.tx`. Give exactly one of `pool`,
   * `connectionString` or `client`.
   */
  readonly pool?: PgPoolLike;
  /** A connection string; oncemq creates its own pool with the `pg` package and ends it on close(). */
  readonly connectionString?: string;
  /** Connections of the pool oncemq creates from `connectionString`. @default 10 */
  readonly poolSize?: number;
  /**
   * A client already inside the caller's transaction (`BEGIN` done by the caller). The ledger
   * joins it: each claim runs under a savepoint, the caller commits. Transactional mode only.
   */
  readonly client?: PgClientLike;
  /** Schema of the ledger table; created by migrate() when missing. @default 'public' */
  readonly schema?: string;
  /** Ledger table name (at most 48 characters: index names derive from it). @default 'oncemq_ledger' */
  readonly table?: string;
  /** How long finished rows are kept. Must outlast the redelivery horizon. @default '7d' */
  readonly retention?: Duration;
  /**
   * Prepares oncemq's statements once per connection (named statements). Turn off behind a pooler
   * that cannot keep them (PgBouncer in transaction mode before 1.21). @default true
   */
  readonly preparedStatements?: boolean;
  /**
   * `'daily'`: the table is partitioned by the day a key was first claimed, and retention drops whole
   * day partitions. Uniqueness across days is kept by an advisory lock per key (one more round trip
   * per claim; leased claims then run in a short transaction). See docs/ledgers/postgres.md. @default false
   */
  readonly partitioned?: false | 'daily';
  /** Runs migrate() from init(). Turn off when migrations run in a deploy step. @default true */
  readonly migrate?: boolean;
  /**
   * Clock in epoch milliseconds for leases and timestamps. Leases use the application's clock (not
   * the database's), so hosts sharing a ledger must keep their clocks in sync well within a lease.
   * @default Date.now
   */
  readonly clock?: () => number;
}

export const DEFAULT_POSTGRES_LEDGER_CONFIG = Object.freeze({
  schema: 'public',
  table: 'oncemq_ledger',
  retention: '7d',
  poolSize: 10,
  preparedStatements: true,
  partitioned: false,
  migrate: true,
} as const);

/** Longest table name: `<table>_status_updated` must stay within PostgreSQL's 63-byte identifiers. */
export const MAX_POSTGRES_TABLE_LENGTH = 48;
/** Longest key (UTF-8 bytes) the ledger stores; the pipeline's normalized keys are far shorter. */
export const MAX_POSTGRES_KEY_BYTES = 1024;
/** Longest error text stored as a remark. */
export const MAX_POSTGRES_REMARK_LENGTH = 2000;

/** PostgreSQL text cannot hold NUL; free text (broker ids, topics, remarks) has it replaced. */
function pgText(value: string): string {
  return value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value;
}

function checkRequest(request: ClaimRequest): void {
  for (const [what, value, max] of [
    ['key', request.key, MAX_POSTGRES_KEY_BYTES],
    ['group', request.group, 256],
  ] as const) {
    if (value.includes('\u0000')) {
      throw new PermanentError(
        'invalid-key',
        `the ${what} contains a NUL byte, which PostgreSQL text cannot store`,
      );
    }
    if (Buffer.byteLength(value) > max) {
      throw new PermanentError(
        'invalid-key',
        `the ${what} is longer than ${max} bytes; normalize it (normalizeKey)`,
      );
    }
  }
}

/**
 * Ledger in a PostgreSQL table through `pg`. The claim is `INSERT … ON CONFLICT DO NOTHING`: a
 * concurrent copy of an in-flight claim waits on the unique index for the first transaction, then
 * sees its row (duplicate) or, if it rolled back, inserts (acquired) — never a unique-violation error.
 * Transactions run in the server's default READ COMMITTED isolation.
 */
export class PostgresLedger implements Ledger<PgClientLike> {
  readonly name = 'postgres';
  readonly capabilities: LedgerCapabilities;
  readonly retentionMs: number;
  readonly schema: string;
  readonly table: string;

  readonly #config: PostgresLedgerConfig;
  readonly #clock: () => number;
  readonly #sql: PgStatements;
  readonly #joined: PgClientLike | undefined;
  readonly #partitioned: boolean;
  #pool: PgPoolLike | undefined;
  #initialized: Promise<void> | undefined;

  constructor(config: PostgresLedgerConfig) {
    const sources = [config.pool, config.connectionString, config.client].filter((s) => s !== undefined);
    if (sources.length !== 1) {
      throw new ConfigError('pool', 'give exactly one of pool (a pg Pool), connectionString or client');
    }
    this.#config = config;
    this.schema = sqlIdentifier(config.schema ?? DEFAULT_POSTGRES_LEDGER_CONFIG.schema, 'schema');
    this.table = sqlIdentifier(config.table ?? DEFAULT_POSTGRES_LEDGER_CONFIG.table, 'table');
    if (this.table.length > MAX_POSTGRES_TABLE_LENGTH) {
      throw new ConfigError(
        'table',
        `must be at most ${MAX_POSTGRES_TABLE_LENGTH} characters (index names derive from it)`,
      );
    }
    this.retentionMs = parseDuration(
      config.retention ?? DEFAULT_POSTGRES_LEDGER_CONFIG.retention,
      'retention',
    );
    this.#clock = config.clock ?? Date.now;
    const partitioned: unknown = config.partitioned ?? DEFAULT_POSTGRES_LEDGER_CONFIG.partitioned;
    if (partitioned !== false && partitioned !== 'daily') {
      throw new ConfigError('partitioned', `expected false or 'daily', got ${JSON.stringify(partitioned)}`);
    }
    this.#partitioned = partitioned === 'daily';
    this.#sql = pgStatements(
      this.schema,
      this.table,
      config.preparedStatements ?? DEFAULT_POSTGRES_LEDGER_CONFIG.preparedStatements,
      this.#partitioned,
    );
    this.#pool = config.pool;
    this.#joined = config.client;
    const joined = config.client !== undefined;
    this.capabilities = Object.freeze({
      ...DEFAULT_LEDGER_CAPABILITIES,
      transactional: true,
      leased: !joined,
      batchClaim: true,
      inspect: true,
    });
  }

  /** The ledger joined to `client`, a connection inside the caller's transaction (same table and clock). */
  join(client: PgClientLike): PostgresLedger {
    return new PostgresLedger({
      schema: this.schema,
      table: this.table,
      retention: this.retentionMs,
      clock: this.#clock,
      preparedStatements: this.#config.preparedStatements,
      partitioned: this.#config.partitioned,
      client,
      migrate: false,
    });
  }

  /** Where autocommit statements go: the pool, or the joined client. */
  get #q(): PgClientLike {
    const target = this.#joined ?? this.#pool;
    if (target === undefined) throw notInitialized();
    return target;
  }

  init(): Promise<void> {
    this.#initialized ??= this.#open().catch((error: unknown) => {
      this.#initialized = undefined;
      throw error;
    });
    return this.#initialized;
  }

  async #open(): Promise<void> {
    if (this.#pool === undefined && this.#config.connectionString !== undefined) {
      let Pool: new (options: object) => PgPoolLike;
      try {
        const pg = (await import('pg')) as unknown as { default: { Pool: typeof Pool } };
        Pool = pg.default.Pool;
      } catch (error) {
        throw new ConfigError(
          'connectionString',
          'connecting by URL needs the pg package (npm install pg@8)',
          {
            cause: error,
          },
        );
      }
      this.#pool = new Pool({
        connectionString: this.#config.connectionString,
        max: this.#config.poolSize ?? DEFAULT_POSTGRES_LEDGER_CONFIG.poolSize,
      });
    }
    if (this.#config.migrate ?? DEFAULT_POSTGRES_LEDGER_CONFIG.migrate) await this.migrate();
  }

  /**
   * Creates the schema, the table and its indexes, or upgrades them to the latest version; idempotent.
   * Versions are recorded in `<table>_schema`; concurrent starters serialize on an advisory lock.
   */
  async migrate(): Promise<number> {
    const partitioned = this.#partitioned ? { nowMs: this.#clock() } : undefined;
    return this.#inTransaction(
      (client) => pgMigrate(client, this.schema, this.table, partitioned),
      () => true,
    );
  }

  /** Runs `fn` in a transaction: a pooled client with BEGIN/COMMIT, or a savepoint in the joined one. */
  #inTransaction<T>(fn: (client: PgClientLike) => Promise<T>, keep: (value: T) => boolean): Promise<T> {
    if (this.#joined !== undefined) return pgSavepoint(this.#joined, fn, keep);
    if (this.#pool === undefined) throw notInitialized();
    return pgTransaction(this.#pool, fn, keep);
  }

  /** Claims on `client` (a transaction, or the pool for leased autocommit claims). */
  #claimOn(
    client: PgClientLike,
    request: ClaimRequest,
    status: 'PROCESSING' | 'SUCCESS',
  ): Promise<ClaimResult> {
    checkRequest(request);
    return pgClaimOne(client, request, status, {
      sql: this.#sql,
      clock: this.#clock,
      partitioned: this.#partitioned,
      text: pgText,
    });
  }

  transaction(request: ClaimRequest, work: TransactionWork<PgClientLike>): Promise<ClaimResult> {
    return this.#inTransaction(async (client) => {
      const claimed = await this.#claimOn(client, request, 'SUCCESS');
      if (!isWon(claimed)) return claimed;
      const result = await work(client, claimed.claim);
      if (result !== null) {
        await pgExecute(
          client,
          this.#sql.storeResult,
          [request.group, request.key, result],
          'storing the result',
        );
      }
      return claimed;
    }, isWon);
  }

  async recordFailure(request: ClaimRequest, remark: string): Promise<void> {
    checkRequest(request);
    const record = async (client: PgClientLike): Promise<void> => {
      if (this.#partitioned) {
        await pgQuery(client, this.#sql.lock, [keyLockText(request.group, request.key)], 'locking the key');
      }
      await this.#recordFailureOn(client, request, remark);
    };
    await (this.#partitioned ? this.#inTransaction(record, () => true) : record(this.#q));
  }

  async #recordFailureOn(client: PgClientLike, request: ClaimRequest, remark: string): Promise<void> {
    await pgExecute(
      client,
      this.#sql.recordFailure,
      [
        request.group,
        request.key,
        request.fingerprint,
        pgText(request.brokerId),
        pgText(request.topic),
        pgText(remark.slice(0, MAX_POSTGRES_REMARK_LENGTH)),
        new Date(this.#clock()),
      ],
      'recording a failure',
    );
  }

  claim(request: ClaimRequest): Promise<ClaimResult> {
    if (this.#joined !== undefined) {
      throw new ConfigError(
        'mode',
        "a ledger joined to the caller's transaction has no leased claims; use 'transactional'",
      );
    }
    if (this.#partitioned) {
      return this.#inTransaction(
        (client) => this.#claimOn(client, request, 'PROCESSING'),
        () => true,
      );
    }
    return this.#claimOn(this.#q, request, 'PROCESSING');
  }

  async #owned(claim: Claim, what: string, statement: PgStatement, values: unknown[]): Promise<void> {
    const changed = await pgExecute(
      this.#q,
      statement,
      [claim.group, claim.key, claim.owner, claim.attempt, ...values],
      what,
    );
    if (changed !== 1) throw new LeaseLostError(claim.group, claim.key, claim.attempt);
  }

  async renew(claim: Claim, leaseMs: number): Promise<Claim> {
    const now = this.#clock();
    const leaseUntil = new Date(now + leaseMs);
    await this.#owned(claim, 'renewing a lease', this.#sql.renew, [leaseUntil, new Date(now)]);
    return { ...claim, leaseUntil };
  }

  complete(claim: Claim, result: string | null): Promise<void> {
    return this.#owned(claim, 'completing', this.#sql.complete, [result, new Date(this.#clock())]);
  }

  fail(claim: Claim, remark: string): Promise<void> {
    return this.#owned(claim, 'marking a failure', this.#sql.fail, [
      pgText(remark.slice(0, MAX_POSTGRES_REMARK_LENGTH)),
      new Date(this.#clock()),
    ]);
  }

  release(claim: Claim): Promise<void> {
    return this.#owned(claim, 'releasing', this.#sql.release, []);
  }

  /**
   * Claims a batch with one multi-row `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING RETURNING`
   * in one transaction, keys in sorted order (concurrent batches cannot deadlock), and runs `work` once.
   */
  transactionMany(
    requests: readonly ClaimRequest[],
    work: BatchWork<PgClientLike>,
  ): Promise<readonly ClaimResult[]> {
    requests.forEach(checkRequest);
    return this.#inTransaction(
      (client) =>
        pgClaimMany(client, requests, work, {
          sql: this.#sql,
          now: this.#clock(),
          text: pgText,
          claimOne: (c, request) => this.#claimOn(c, request, 'SUCCESS'),
          lockMany: this.#partitioned
            ? async (c, keys) => {
                await pgQuery(
                  c,
                  this.#sql.lockMany,
                  [keys.map((r) => keyLockText(r.group, r.key))],
                  'locking keys',
                );
              }
            : undefined,
        }),
      () => true,
    );
  }

  async get(group: string, key: string): Promise<LedgerRecord | undefined> {
    const [row] = await pgQuery<PgLedgerRow>(this.#q, this.#sql.select, [group, key], 'reading');
    return row === undefined ? undefined : pgRecord(row);
  }

  list(query: ListQuery): Promise<readonly LedgerRecord[]> {
    return pgList(this.#q, this.#sql, query);
  }

  async reset(group: string, key: string, options: { readonly force?: boolean } = {}): Promise<boolean> {
    const deleted = await pgExecute(
      this.#q,
      this.#sql.reset,
      [group, key, options.force === true],
      'resetting',
    );
    return deleted === 1;
  }

  /**
   * Takes a session advisory lock on a dedicated pooled connection, held until release() (or until
   * that connection dies, which frees it). A joined ledger locks on the caller's connection.
   */
  tryMaintenanceLock(): Promise<MaintenanceLock | undefined> {
    const name = `oncemq:maintenance:${this.schema}.${this.table}`;
    if (this.#joined !== undefined) return pgTryAdvisoryLock({ client: this.#joined }, name);
    if (this.#pool === undefined) throw notInitialized();
    return pgTryAdvisoryLock({ pool: this.#pool }, name);
  }

  async purge(options: PurgeOptions): Promise<PurgeResult> {
    if (!this.#partitioned) return pgPurge(this.#q, this.#sql, options);
    const now = this.#clock();
    await this.#inTransaction(
      (client) => ensurePartitions(client, this.schema, this.table, now),
      () => true,
    );
    const dropped = await dropExpiredPartitions(
      this.#q,
      (fn) => this.#inTransaction(fn, () => true),
      this.schema,
      this.table,
      options.olderThan,
      now,
    );
    const rows = await pgPurge(this.#q, this.#sql, options);
    return { deleted: dropped.deleted + rows.deleted, batches: dropped.partitions + rows.batches };
  }

  async close(): Promise<void> {
    const pool = this.#pool;
    if (this.#config.connectionString !== undefined && pool !== undefined) {
      this.#pool = undefined;
      this.#initialized = undefined;
      try {
        await pool.end?.();
      } catch (error) {
        throw pgFailure(error, 'closing the pool');
      }
    }
  }
}

function notInitialized(): LedgerUnavailableError {
  return new LedgerUnavailableError('the PostgreSQL ledger is not initialized; call init() first');
}
