import { ConfigError } from '../core/errors.js';
import type { SqliteConnectionSource } from '../ledger/sqlite/sqlite-connection-source.js';
import { isSqliteDatabase, type SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';
import type { KnexLike, KnexTransactionLike } from './knex-bridge.js';
import { openTransaction, transactionEnded } from './sqlite-source-ledger.js';
import { SqliteWriteLock } from './sqlite-write-lock.js';

const TRX = 'this Knex transaction';

/**
 * The part of Knex's client on better-sqlite3 oncemq calls: its pool (of one connection, unless the
 * application configured more), through which the ledger borrows the connection as Knex's own queries do.
 */
export interface KnexSqliteClientLike {
  /** `better-sqlite3`. */
  readonly driverName?: unknown;
  /** The connection settings. */
  readonly connectionSettings?: {
    /** The database file; `:memory:` (or empty) for a database in memory, private to its connection. */
    readonly filename?: unknown;
  };
  /** Takes a connection (a better-sqlite3 `Database`) from Knex's pool, waiting for a free one. */
  acquireConnection(): Promise<unknown>;
  /** Gives a connection back to the pool. */
  releaseConnection(connection: unknown): unknown;
}

/** Whether `knex` talks to SQLite, through better-sqlite3 or another driver (node-sqlite3). */
export function isKnexSqlite(knex: KnexLike): boolean {
  const client = knex.client as { dialect?: unknown; driverName?: unknown } | undefined;
  return client?.dialect === 'sqlite3' || client?.driverName === 'better-sqlite3';
}

/** Knex's client on better-sqlite3; node-sqlite3 (`client: 'sqlite3'`) is refused. */
function sqliteClient(knex: KnexLike): KnexSqliteClientLike {
  const client = knex.client as Partial<KnexSqliteClientLike>;
  if (client.driverName !== 'better-sqlite3') {
    throw new ConfigError(
      'knex',
      `Knex's SQLite client ${JSON.stringify(client.driverName)} has no oncemq ledger: use client 'better-sqlite3' ` +
        '(oncemq runs its statements on the connection synchronously, as better-sqlite3 does)',
    );
  }
  if (typeof client.acquireConnection !== 'function' || typeof client.releaseConnection !== 'function') {
    throw new ConfigError('knex', 'this Knex client lends no connection (acquireConnection is missing)');
  }
  return client as KnexSqliteClientLike;
}

/** A connection Knex lent: a better-sqlite3 `Database`, or a refusal. */
function lent(connection: unknown): SqliteDatabaseLike {
  if (!isSqliteDatabase(connection)) {
    throw new ConfigError('knex', 'Knex lent a connection that is not a better-sqlite3 Database');
  }
  return connection;
}

/** What a Knex transaction (`trx`) has beyond what the PostgreSQL and MySQL bridges call. */
interface KnexSqliteTransactionLike {
  readonly isTransaction?: unknown;
  isCompleted?(): unknown;
  readonly client?: { acquireConnection?(): Promise<unknown> };
}

/**
 * The better-sqlite3 connection under `trx` (a Knex transaction answers its own connection from its
 * client), checked open; a better-sqlite3 `Database` itself passes as it is (the relay and
 * `outbox.migrate()` run on one of their own). The knex instance, or a transaction that has ended, is
 * refused at once.
 */
function transactionDatabase(trx: unknown): SqliteDatabaseLike | Promise<SqliteDatabaseLike> {
  if (isSqliteDatabase(trx)) return trx;
  const shape = trx as KnexSqliteTransactionLike | null;
  const client = shape?.client;
  if (shape?.isTransaction !== true || client?.acquireConnection === undefined) {
    throw new ConfigError(
      'tx',
      'expected a Knex transaction (the `trx` of knex.transaction(), or ctx.tx), not the knex instance: ' +
        'its writes would wait for the connection the claim holds, or commit on their own outside the claim’s transaction',
    );
  }
  if (shape.isCompleted?.() === true) throw transactionEnded(TRX);
  return client.acquireConnection().then((connection) => openTransaction(lent(connection), TRX));
}

/**
 * How the SQLite ledger of table `table` reaches the better-sqlite3 connection of a Knex instance: it
 * borrows it from Knex's pool for each operation, as Knex's own queries do, and each transactional
 * claim is one `knex.transaction()` (Knex's `BEGIN`), whose `trx` is the handler's `ctx.tx`; the
 * ledger's statements run on the same connection, under a savepoint, once the transaction holds
 * SQLite's write lock (see SqliteWriteLock). While a claim's transaction is open nothing else of the
 * application runs on that connection: its other queries wait for Knex's pool, as they wait for any
 * transaction of its own.
 */
export function knexSqliteSource<Tx extends KnexTransactionLike>(
  knex: KnexLike<Tx>,
  table: string,
): SqliteConnectionSource<SqliteDatabaseLike, Tx> {
  const client = sqliteClient(knex);
  const lock = new SqliteWriteLock(table);
  const filename = client.connectionSettings?.filename;
  return {
    memory: filename === ':memory:' || filename === '',
    hold: (work) =>
      lock.retry(async () => {
        const connection = await client.acquireConnection();
        try {
          const db = lent(connection);
          return await lock.patiently(db, () => work(db));
        } finally {
          await client.releaseConnection(connection);
        }
      }),
    transaction: (work) =>
      lock.retry(() =>
        knex.transaction(async (trx) => {
          const db = await transactionDatabase(trx);
          lock.take(db);
          return work(db, trx);
        }),
      ),
    database: (tx) => transactionDatabase(tx),
  };
}
