import { parseDuration, type Duration } from '../core/duration.js';
import { ConfigError, LedgerUnavailableError } from '../core/errors.js';
import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import type { PgClientLike } from '../ledger/postgres/postgres-client.js';
import { prismaMysqlConnection } from './prisma-mysql-connection.js';
import { prismaPgClient } from './prisma-pg-client.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import { toolBridge } from './tool-bridge.js';

/**
 * The part of a Prisma client, or of the transaction client `tx` of `prisma.$transaction(async (tx) => …)`
 * (`Prisma.TransactionClient`), oncemq calls: raw statements with bound values.
 */
export interface PrismaQueryableLike {
  /** Runs a statement with bound values; answers the affected row count. */
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
  /** Runs a statement with bound values; answers its rows. */
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
}

/** Prisma's isolation levels (`Prisma.TransactionIsolationLevel`) on PostgreSQL and MySQL. */
export type PrismaIsolationLevel = 'ReadUncommitted' | 'ReadCommitted' | 'RepeatableRead' | 'Serializable';

/** The options of one interactive transaction, as `prisma.$transaction(fn, options)` takes them. */
export interface PrismaTransactionOptionsLike {
  /** Milliseconds to wait for a connection. */
  maxWait?: number;
  /** Milliseconds after which Prisma rolls the transaction back. */
  timeout?: number;
  /** The transaction's isolation level. */
  isolationLevel?: PrismaIsolationLevel;
}

/** The part of a Prisma client (`new PrismaClient({ adapter })`, or one `$extends` made) oncemq calls. */
export interface PrismaClientLike<
  Tx extends PrismaQueryableLike = PrismaQueryableLike,
> extends PrismaQueryableLike {
  /** Runs `fn` in an interactive transaction: committed when it resolves, rolled back when it throws. */
  $transaction<R>(fn: (tx: Tx) => Promise<R>, options?: PrismaTransactionOptionsLike): PromiseLike<R>;
  /** Present on the client, absent on a transaction client: how one is told from the other. */
  $connect(): PromiseLike<void>;
}

/** The interactive transactions oncemq opens through Prisma for its claims and their handlers. */
export interface PrismaTransactionOptions {
  /**
   * How long a claim's transaction (the claim, the handler, the completion) may run. oncemq checks it
   * when the transaction's work has settled, before the commit: a transaction that ran longer is
   * rolled back and the delivery retried, never acked. Prisma's own timeout is set to twice this, a
   * last resort for a handler that never returns (Prisma's timeout does not wait for an operation in
   * flight: the rest of that operation may run outside the transaction). Prisma's default (5s) suits
   * a web request; a handler may wait on other services, and while it runs the copies of its key wait
   * on the claim's row, so it is the pipeline's default lease. @default '30s'
   */
  readonly timeout?: Duration;
  /** How long a claim waits for a connection of Prisma's pool. @default the client's (Prisma: 2s) */
  readonly maxWait?: Duration;
  /**
   * Isolation of the claim's transaction. The ledgers are written for the database's default (READ
   * COMMITTED on PostgreSQL, REPEATABLE READ on MySQL/MariaDB); under Serializable a claim racing
   * another copy of its key may fail with a serialization error, and that delivery is retried.
   * @default the client's (the database's default)
   */
  readonly isolationLevel?: PrismaIsolationLevel;
}

/** Configuration of {@link prismaBridge}. */
export interface PrismaBridgeConfig {
  /** The interactive transactions oncemq opens through the client. @default { timeout: '30s' } */
  readonly transactionOptions?: PrismaTransactionOptions;
  /**
   * The datasource provider of the client's schema. @default read from the client (its `_activeProvider`)
   */
  readonly provider?: 'postgresql' | 'mysql';
}

/** The defaults of `transactionOptions`: a claim's deadline of 30 s, the pipeline's default lease. */
export const DEFAULT_PRISMA_TRANSACTION_OPTIONS: Readonly<{
  /** The claim's deadline. */
  timeout: '30s';
}> = Object.freeze({ timeout: '30s' } as const);

/** The longest delay a Node.js timer keeps (about 24.8 days): Prisma's timeout for oncemq's own held connections. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

const ISOLATION_LEVELS: readonly unknown[] = [
  'ReadUncommitted',
  'ReadCommitted',
  'RepeatableRead',
  'Serializable',
];

const PROVIDERS: Readonly<Record<string, 'postgres' | 'mysql'>> = { postgresql: 'postgres', mysql: 'mysql' };

function milliseconds(value: Duration, field: string): number {
  const ms = parseDuration(value, field);
  if (ms < 1 || ms > MAX_TIMER_MS) {
    throw new ConfigError(field, `must be between 1ms and ${MAX_TIMER_MS}ms (a Node.js timer), got ${ms}ms`);
  }
  return ms;
}

/** A claim's transaction options, checked: oncemq's deadline, and what is passed to `$transaction`. */
export interface ResolvedPrismaTransactionOptions {
  /** oncemq's deadline of the transaction's work, checked before the commit. */
  readonly deadlineMs: number;
  /** Passed to `$transaction`: Prisma's timeout is twice the deadline (at most a Node.js timer's longest). */
  readonly prisma: PrismaTransactionOptionsLike;
}

/** Checks `options` and fills in the defaults. */
export function prismaTransactionOptions(
  options: PrismaTransactionOptions = {},
): ResolvedPrismaTransactionOptions {
  const { timeout, maxWait, isolationLevel } = options;
  if (isolationLevel !== undefined && !ISOLATION_LEVELS.includes(isolationLevel)) {
    throw new ConfigError(
      'transactionOptions.isolationLevel',
      `expected one of ${ISOLATION_LEVELS.join(', ')}, got ${JSON.stringify(isolationLevel)}`,
    );
  }
  const deadlineMs = milliseconds(
    timeout ?? DEFAULT_PRISMA_TRANSACTION_OPTIONS.timeout,
    'transactionOptions.timeout',
  );
  return Object.freeze({
    deadlineMs,
    prisma: Object.freeze({
      timeout: Math.min(2 * deadlineMs, MAX_TIMER_MS),
      ...(maxWait === undefined ? {} : { maxWait: milliseconds(maxWait, 'transactionOptions.maxWait') }),
      ...(isolationLevel === undefined ? {} : { isolationLevel }),
    }),
  });
}

/** The database `prisma` talks to; another provider than PostgreSQL or MySQL is refused. */
export function prismaDatabase(prisma: PrismaClientLike, provider?: string): 'postgres' | 'mysql' {
  const name = provider ?? (prisma as { _activeProvider?: unknown })._activeProvider;
  const database = typeof name === 'string' && Object.hasOwn(PROVIDERS, name) ? PROVIDERS[name] : undefined;
  if (database === undefined) {
    throw new ConfigError(
      'provider',
      name === undefined
        ? "this Prisma client does not say its datasource provider; pass provider: 'postgresql' or 'mysql'"
        : `Prisma provider ${JSON.stringify(name)} has no oncemq ledger through Prisma; use postgresql or mysql ` +
            '(on SQLite, give the better-sqlite3 database to SqliteLedger)',
    );
  }
  return database;
}

/** Refuses the full client (or anything else) where a transaction client is required. */
function checkTransaction<Tx extends PrismaQueryableLike>(tx: Tx): Tx {
  const value = tx as Partial<PrismaClientLike> | null;
  const queryable =
    typeof value?.$executeRawUnsafe === 'function' && typeof value.$queryRawUnsafe === 'function';
  if (!queryable || typeof value.$connect === 'function') {
    throw new ConfigError(
      'tx',
      'expected a Prisma transaction client (the `tx` of prisma.$transaction(async (tx) => …), or ctx.tx), ' +
        'not the PrismaClient: its writes would run on another connection, outside the claim’s transaction',
    );
  }
  return tx;
}

/**
 * The bridge of a Prisma client on PostgreSQL (`@prisma/adapter-pg`) or MySQL/MariaDB
 * (`@prisma/adapter-mariadb`): claims open an interactive transaction with `prisma.$transaction()`
 * (with `transactionOptions`), the handler gets its transaction client `tx`, and the ledger's
 * statements run on it through `tx.$queryRawUnsafe()` / `tx.$executeRawUnsafe()`. A transaction
 * that fails to start (no connection within maxWait) or to commit (past its timeout) is a
 * LedgerUnavailableError: the delivery is retried. Each transaction's shim is made once and kept with it.
 */
export function prismaBridge<Tx extends PrismaQueryableLike>(
  prisma: PrismaClientLike<Tx>,
  config: PrismaBridgeConfig = {},
): SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx> {
  const database = prismaDatabase(prisma, config.provider);
  const { deadlineMs, prisma: options } = prismaTransactionOptions(config.transactionOptions);
  const held: PrismaTransactionOptionsLike = {
    ...(options.maxWait === undefined ? {} : { maxWait: options.maxWait }),
    timeout: MAX_TIMER_MS,
  };
  /**
   * Runs `work` in a transaction of Prisma's. Past `deadline` (once work has settled, so that none of
   * its statements is still on the way) the transaction is rolled back; a failure outside `work` is
   * the ledger's to report.
   */
  const transaction = async <T>(
    work: (tx: Tx) => Promise<T>,
    transactionOptions: PrismaTransactionOptionsLike,
    deadline?: number,
  ): Promise<T> => {
    const outcome: { failed: boolean; late?: LedgerUnavailableError } = { failed: false };
    try {
      return await prisma.$transaction(async (tx) => {
        const started = Date.now();
        let value: T;
        try {
          value = await work(tx);
        } catch (error) {
          outcome.failed = true;
          throw error;
        }
        const elapsed = Date.now() - started;
        if (deadline !== undefined && elapsed > deadline) {
          outcome.late = new LedgerUnavailableError(
            `the claim's transaction ran ${elapsed}ms, past transactionOptions.timeout (${deadline}ms): ` +
              'it was rolled back and nothing was applied',
          );
          throw outcome.late;
        }
        return value;
      }, transactionOptions);
    } catch (error) {
      if (outcome.failed || error === outcome.late) throw error;
      const message = error instanceof Error ? error.message : String(error);
      throw new LedgerUnavailableError(
        `the Prisma transaction did not start within maxWait, or did not commit (past its timeout of ` +
          `${transactionOptions.timeout ?? 'the client’s'}ms?): nothing was applied. ${message}`,
        { cause: error },
      );
    }
  };
  const over = (q: PrismaQueryableLike, tx?: Tx): PgClientLike | MysqlConnectionLike =>
    database === 'postgres'
      ? prismaPgClient(q)
      : prismaMysqlConnection(q, (work) =>
          tx === undefined ? transaction((t) => work(t), options) : work(q),
        );
  return toolBridge<Tx, Tx>({
    database,
    autocommit: over(prisma),
    open: (work) => transaction(work, options, deadlineMs),
    transactionOf: checkTransaction,
    over: (tx) => over(tx, tx),
    hold: (work) => transaction(work, held),
  });
}
