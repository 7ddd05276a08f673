import { ConfigError, LedgerUnavailableError } from '../../core/errors.js';
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
import type { LedgerRow } from '../ledger-row.js';
import { unreachableLedger } from '../ledger-errors.js';
import { checkSchemaVersion } from '../schema-version.js';
import { OWNED_WRITE_DOING, SqlLeases } from '../sql-leases.js';
import { pgClaimMany } from './postgres-batch-claim.js';
import { pgClaimOne, pgRecord } from './postgres-claim.js';
import { pgExecute, pgQuery, pgTextArray, type PgClientLike, type PgPoolLike } from './postgres-client.js';
import { postgresDialect } from './postgres-dialect.js';
import { pgStatements, pgMigrations, type PgStatements } from './postgres-ledger-sql.js';
import { pgList, pgPurge, pgTryAdvisoryLock } from './postgres-maintenance.js';
import { pgMigrate, pgSchemaVersion } from './postgres-migrate.js';
import { dropExpiredPartitions, ensurePartitions, keyLockText } from './postgres-partitions.js';
import { pgCommitCheck, pgSavepoint, pgTransaction } from './postgres-transaction.js';
import { bridgedDialect, bridgeTransaction, pinConnection, type SqlBridge } from '../sql-bridge.js';
import type { SqlDialect } from '../sql-dialect.js';

/** What the PostgreSQL backend is built from: the ledger's configuration, checked. */
export interface PostgresBackendSettings<Tx> {
  readonly pool: PgPoolLike | undefined;
  readonly connectionString: string | undefined;
  readonly poolSize: number;
  /** A client inside the caller's transaction, which the ledger joins. */
  readonly client: PgClientLike | undefined;
  /** The caller's transaction `client` belongs to, handed to the work (`client` itself when undefined). */
  readonly joinedTx: Tx | undefined;
  /** Transactions opened through the application's ORM or query builder instead of the pool. */
  readonly bridge: SqlBridge<PgClientLike, Tx> | undefined;
  readonly schema: string;
  readonly table: string;
  readonly retentionMs: number;
  readonly clock: () => number;
  readonly preparedStatements: boolean;
  readonly partitioned: boolean;
  readonly migrate: boolean;
}

/**
 * The PostgreSQL ledger's backend: autocommit statements on the pool (or the joined client),
 * transactions on a pooled client (or under a savepoint of the joined client's transaction).
 */
export class PostgresBackend<Tx = PgClientLike>
  implements LedgerBackend<Tx>, TransactionalClaims<Tx>, LedgerInspection
{
  readonly name = 'postgres';
  readonly retentionMs: number;
  readonly dialect: SqlDialect<Tx>;
  readonly transactional = this;
  /** A joined ledger has no leased claims: a lease must be visible before the caller's transaction ends. */
  readonly leased: SqlLeases<Date> | undefined;
  readonly inspect = this;

  readonly #settings: PostgresBackendSettings<Tx>;
  readonly #sql: PgStatements;
  readonly #clock: () => number;
  #pool: PgPoolLike | undefined;

  constructor(settings: PostgresBackendSettings<Tx>) {
    this.#settings = settings;
    this.dialect =
      settings.bridge === undefined
        ? (postgresDialect as unknown as SqlDialect<Tx>)
        : bridgedDialect(postgresDialect, settings.bridge);
    this.retentionMs = settings.retentionMs;
    this.#clock = settings.clock;
    this.#pool = settings.pool;
    this.#sql = pgStatements(
      settings.schema,
      settings.table,
      settings.preparedStatements,
      settings.partitioned,
    );
    this.leased =
      settings.client === undefined
        ? new SqlLeases(
            (request) => this.#claimLeased(request),
            (statement, values) =>
              pgExecute(this.#q, this.#sql.owned[statement], values, OWNED_WRITE_DOING[statement]),
            this.#clock,
            (ms) => new Date(ms),
          )
        : undefined;
  }

  /** Where autocommit statements go: the joined client, the bridge, or the pool. */
  get #q(): PgClientLike {
    const target = this.#settings.client ?? this.#settings.bridge?.autocommit ?? this.#pool;
    if (target === undefined) throw new LedgerUnavailableError('the PostgreSQL ledger is not open');
    return target;
  }

  /** Creates the pool of a ledger configured with a connection string, once. */
  async #connect(): Promise<void> {
    const { connectionString, poolSize } = this.#settings;
    if (this.#pool !== undefined || connectionString === undefined) return;
    let Pool: new (options: object) => PgPoolLike;
    try {
      Pool = ((await import('pg')) as unknown as { default: { Pool: typeof Pool } }).default.Pool;
    } catch (error) {
      throw new ConfigError('connectionString', 'connecting by URL needs the pg package (npm install pg@8)', {
        cause: error,
      });
    }
    this.#pool = new Pool({ connectionString, max: poolSize });
  }

  async open(): Promise<void> {
    try {
      await this.#open();
    } catch (error) {
      throw unreachableLedger('PostgreSQL', this.#url(), error) ?? error;
    }
  }

  /** Where the ledger connects, for messages: its connection string, else what its pool was given. */
  #url(): string | undefined {
    if (this.#settings.connectionString !== undefined) return this.#settings.connectionString;
    const options = (this.#pool as { options?: Record<string, unknown> } | undefined)?.options;
    if (typeof options?.connectionString === 'string') return options.connectionString;
    const { host, port, database } = options ?? {};
    if (typeof host !== 'string') return undefined;
    const db = typeof database === 'string' ? database : '';
    return `postgres://${host}:${typeof port === 'number' ? port : 5432}/${db}`;
  }

  async #open(): Promise<void> {
    await this.#connect();
    if (this.#settings.migrate) {
      await this.migrate();
      return;
    }
    const { schema, table, partitioned } = this.#settings;
    checkSchemaVersion(
      await pgSchemaVersion(this.#q, schema, table),
      pgMigrations(schema, table, partitioned).length,
      `"${schema}"."${table}"`,
      `oncemq migrate --store postgres --schema ${schema} --table ${table}`,
    );
  }

  /** Creates the schema, the table and its indexes, or upgrades them; answers the version reached. */
  async migrate(): Promise<number> {
    await this.#connect();
    const { schema, table, partitioned } = this.#settings;
    return this.#inTransaction((client) =>
      pgMigrate(client, schema, table, partitioned ? { nowMs: this.#clock() } : undefined),
    );
  }

  /** Ends the pool the ledger made from a connection string; a pool or client given to it stays open. */
  async close(): Promise<void> {
    const pool = this.#pool;
    if (this.#settings.connectionString === undefined || pool === undefined) return;
    this.#pool = undefined;
    await pool.end?.();
  }

  /**
   * Runs `fn` in a transaction: a savepoint in the joined client's, one the bridge opens through the
   * application's tool, or a pooled client with BEGIN/COMMIT. `fn` gets the client the ledger's
   * statements run on and the transaction handed to the caller's work.
   */
  #inTransaction<T>(
    fn: (client: PgClientLike, tx: Tx) => Promise<T>,
    keep: (value: T) => boolean = () => true,
  ): Promise<T> {
    const { client: joined, joinedTx, bridge } = this.#settings;
    if (joined !== undefined) return pgSavepoint(joined, (c) => fn(c, joinedTx ?? (c as Tx)), keep);
    if (bridge !== undefined) return bridgeTransaction(bridge, fn, keep, pgCommitCheck);
    if (this.#pool === undefined) throw new LedgerUnavailableError('the PostgreSQL ledger is not open');
    return pgTransaction(this.#pool, (c) => fn(c, c as Tx), keep);
  }

  #claimOn(
    client: PgClientLike,
    request: ClaimRequest,
    status: 'PROCESSING' | 'SUCCESS',
  ): Promise<ClaimResult> {
    return pgClaimOne(client, request, status, {
      sql: this.#sql,
      clock: this.#clock,
      partitioned: this.#settings.partitioned,
    });
  }

  /** A leased claim: autocommit, or a short transaction holding the key's lock when partitioned. */
  #claimLeased(request: ClaimRequest): Promise<ClaimResult> {
    if (this.#settings.partitioned)
      return this.#inTransaction((c) => this.#claimOn(c, request, 'PROCESSING'));
    return this.#claimOn(this.#q, request, 'PROCESSING');
  }

  transaction(request: ClaimRequest, work: TransactionWork<Tx>): Promise<ClaimResult> {
    return this.#inTransaction(async (client, tx) => {
      const claimed = await this.#claimOn(client, request, 'SUCCESS');
      if (!isWon(claimed)) return claimed;
      const result = await work(tx, claimed.claim);
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
    const { group, key, fingerprint, brokerId, topic } = request;
    const record = async (client: PgClientLike): Promise<void> => {
      if (this.#settings.partitioned) {
        await pgQuery(client, this.#sql.lock, [keyLockText(group, key)], 'locking the key');
      }
      const values = [group, key, fingerprint, brokerId, topic, remark, new Date(this.#clock())];
      await pgExecute(client, this.#sql.recordFailure, values, 'recording a failure');
    };
    await (this.#settings.partitioned ? this.#inTransaction(record) : record(this.#q));
  }

  /**
   * Claims a batch with one multi-row `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING RETURNING`
   * in one transaction, keys in sorted order (concurrent batches cannot deadlock), and runs `work` once.
   */
  batchClaim(requests: readonly ClaimRequest[], work: BatchWork<Tx>): Promise<readonly ClaimResult[]> {
    const sql = this.#sql;
    return this.#inTransaction((client, tx) =>
      pgClaimMany(client, requests, (_, won) => work(tx, won), {
        sql,
        now: this.#clock(),
        claimOne: (c, request) => this.#claimOn(c, request, 'SUCCESS'),
        lockMany: this.#settings.partitioned
          ? async (c, keys) => {
              const locks = keys.map((r) => keyLockText(r.group, r.key));
              await pgQuery(c, sql.lockMany, [pgTextArray(locks)], 'locking keys');
            }
          : undefined,
      }),
    );
  }

  async get(group: string, key: string): Promise<LedgerRecord | undefined> {
    const [row] = await pgQuery<LedgerRow>(this.#q, this.#sql.select, [group, key], 'reading');
    return row === undefined ? undefined : pgRecord(row);
  }

  list(query: ListQuery): Promise<readonly LedgerRecord[]> {
    return pgList(this.#q, this.#sql, query);
  }

  async reset(group: string, key: string, options: ResetOptions): Promise<boolean> {
    const values = [group, key, options.force === true];
    return (await pgExecute(this.#q, this.#sql.reset, values, 'resetting')) === 1;
  }

  /**
   * Takes a session advisory lock on a dedicated pooled connection, held until release() (or until
   * that connection dies, which frees it). A joined ledger locks on the caller's connection.
   */
  maintenanceLock(): Promise<MaintenanceLock | undefined> {
    const { schema, table, client, bridge } = this.#settings;
    const name = `oncemq:maintenance:${schema}.${table}`;
    if (client !== undefined) return pgTryAdvisoryLock({ client }, name);
    // a tool hands out a connection only inside a transaction: the lock's is held open until release
    if (bridge !== undefined) {
      return pgTryAdvisoryLock(
        { pool: { ...bridge.autocommit, connect: () => pinConnection(bridge) } },
        name,
      );
    }
    if (this.#pool === undefined) throw new LedgerUnavailableError('the PostgreSQL ledger is not open');
    return pgTryAdvisoryLock({ pool: this.#pool }, name);
  }

  async purge(options: Required<PurgeOptions>): Promise<PurgeResult> {
    if (!this.#settings.partitioned) return pgPurge(this.#q, this.#sql, options);
    const { schema, table } = this.#settings;
    const now = this.#clock();
    await this.#inTransaction((client) => ensurePartitions(client, schema, table, now));
    const dropped = await dropExpiredPartitions(
      this.#q,
      (fn) => this.#inTransaction(fn),
      schema,
      table,
      options.olderThan,
      now,
    );
    const rows = await pgPurge(this.#q, this.#sql, options);
    return { deleted: dropped.deleted + rows.deleted, batches: dropped.partitions + rows.batches };
  }
}
