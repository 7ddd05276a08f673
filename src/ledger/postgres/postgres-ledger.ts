import { parseDuration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { RuntimeLedger } from '../runtime-ledger.js';
import { checkBridge, type SqlBridge } from '../sql-bridge.js';
import type { SqlDialect } from '../sql-dialect.js';
import { DEFAULT_SQL_LEDGER_CONFIG, type SqlLedgerConfig } from '../sql-ledger-config.js';
import { sqlIdentifier } from '../sql-identifier.js';
import { PostgresBackend } from './postgres-backend.js';
import type { PgClientLike, PgPoolLike } from './postgres-client.js';

/** Input of `new PostgresLedger(config)`: one connection source (`pool`, `connectionString`, `client` or `bridge`) and the table. */
export interface PostgresLedgerConfig<Tx = PgClientLike> extends SqlLedgerConfig {
  /**
   * The application's pg `Pool`. Each transactional claim checks out a client, opens the
   * transaction, and hands the client to the handler as `ctx.tx`. Give exactly one of `pool`,
   * `connectionString`, `client` or `bridge`.
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
  /**
   * The application's ORM or query builder (`knexBridge(knex)` from `oncemq/knex`, …): each
   * transactional claim opens its transaction through it and hands the tool's own transaction object
   * to the handler as `ctx.tx`. The ORM adapters build the ledger with it (`knexLedger(knex)`).
   */
  readonly bridge?: SqlBridge<PgClientLike, Tx>;
  /** Schema of the ledger table; created by migrate() when missing. @default 'public' */
  readonly schema?: string;
  /** Ledger table name (at most 48 characters: index names derive from it). @default 'oncemq_ledger' */
  readonly table?: string;
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
}

/** Defaults of the {@link PostgresLedgerConfig} fields that have a fixed one. */
export const DEFAULT_POSTGRES_LEDGER_CONFIG = Object.freeze({
  ...DEFAULT_SQL_LEDGER_CONFIG,
  /** The ledger table's schema. */
  schema: 'public',
  /** Connections of the pool made from `connectionString`. */
  poolSize: 10,
  /** oncemq's statements are prepared once per connection. */
  preparedStatements: true,
  /** One unpartitioned table. */
  partitioned: false,
} as const);

/** Longest table name: `<table>_status_updated` must stay within PostgreSQL's 63-byte identifiers. */
export const MAX_POSTGRES_TABLE_LENGTH = 48;

/**
 * Ledger in a PostgreSQL table through `pg`. The claim is `INSERT … ON CONFLICT DO NOTHING`: a
 * concurrent copy of an in-flight claim waits on the unique index for the first transaction, then
 * sees its row (duplicate) or, if it rolled back, inserts (acquired) — never a unique-violation error.
 * Transactions run in the server's default READ COMMITTED isolation.
 */
export class PostgresLedger<Tx = PgClientLike> extends RuntimeLedger<Tx> {
  /** How statements run in the handler's transaction (`transition(ledger.dialect, ctx.tx, …)`). */
  declare readonly dialect: SqlDialect<Tx>;
  /** The ledger table's schema, checked. */
  readonly schema: string;
  /** The ledger table's name, checked. */
  readonly table: string;

  readonly #config: PostgresLedgerConfig<Tx>;
  readonly #backend: PostgresBackend<Tx>;

  constructor(config: PostgresLedgerConfig<Tx>, joinedTx?: Tx) {
    const sources = [config.pool, config.connectionString, config.client, config.bridge].filter(
      (s) => s !== undefined,
    );
    const joinedBridge = joinedTx !== undefined && config.client !== undefined && sources.length === 2;
    if (sources.length !== 1 && !joinedBridge) {
      throw new ConfigError(
        'pool',
        'give exactly one of pool (a pg Pool), connectionString, client or bridge (an ORM adapter)',
      );
    }
    if (config.bridge !== undefined) checkBridge(config.bridge, 'postgres');
    const schema = sqlIdentifier(config.schema ?? DEFAULT_POSTGRES_LEDGER_CONFIG.schema, 'schema');
    const table = sqlIdentifier(config.table ?? DEFAULT_POSTGRES_LEDGER_CONFIG.table, 'table');
    if (table.length > MAX_POSTGRES_TABLE_LENGTH) {
      throw new ConfigError(
        'table',
        `must be at most ${MAX_POSTGRES_TABLE_LENGTH} characters (index names derive from it)`,
      );
    }
    const partitioned: unknown = config.partitioned ?? DEFAULT_POSTGRES_LEDGER_CONFIG.partitioned;
    if (partitioned !== false && partitioned !== 'daily') {
      throw new ConfigError('partitioned', `expected false or 'daily', got ${JSON.stringify(partitioned)}`);
    }
    const backend = new PostgresBackend<Tx>({
      pool: config.pool,
      connectionString: config.connectionString,
      poolSize: config.poolSize ?? DEFAULT_POSTGRES_LEDGER_CONFIG.poolSize,
      client: config.client,
      joinedTx,
      bridge: config.bridge,
      schema,
      table,
      retentionMs: parseDuration(config.retention ?? DEFAULT_POSTGRES_LEDGER_CONFIG.retention, 'retention'),
      clock: config.clock ?? Date.now,
      preparedStatements: config.preparedStatements ?? DEFAULT_POSTGRES_LEDGER_CONFIG.preparedStatements,
      partitioned: partitioned === 'daily',
      migrate: config.migrate ?? DEFAULT_POSTGRES_LEDGER_CONFIG.migrate,
    });
    super(backend, { logger: config.logger });
    this.schema = schema;
    this.table = table;
    this.#config = config;
    this.#backend = backend;
  }

  /**
   * The ledger joined to `tx`, the caller's open transaction (same table, clock and logger): a pg
   * client inside BEGIN, or the ORM's transaction object for a ledger built on a bridge. Each claim
   * runs under a savepoint of it and the caller commits; the work gets `tx` back.
   */
  join(tx: Tx): PostgresLedger<Tx> {
    const { retention, preparedStatements, partitioned, logger, clock, bridge } = this.#config;
    const shared = { retention, preparedStatements, partitioned, logger, clock, bridge };
    const common = { ...shared, schema: this.schema, table: this.table, migrate: false };
    if (bridge === undefined) return new PostgresLedger<Tx>({ ...common, client: tx as PgClientLike });
    return new PostgresLedger<Tx>({ ...common, client: bridge.connection(tx) }, tx);
  }

  /**
   * Creates the schema, the table and its indexes, or upgrades them to the latest version; idempotent.
   * Versions are recorded in `<table>_schema`; concurrent starters serialize on an advisory lock.
   * Answers the version reached. Works whether or not the ledger migrates from init().
   */
  migrate(): Promise<number> {
    return this.whileOpen('migrating', () => this.#backend.migrate());
  }
}
