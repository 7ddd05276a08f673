import { ConfigError } from '../core/errors.js';
import type { SqliteConnectionSource } from '../ledger/sqlite/sqlite-connection-source.js';
import { isSqliteDatabase, type SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';
import type { KnexLike, KnexTransactionLike } from './knex-bridge.js';
import { openTransaction, transactionEnded, type SqliteOrm } from './sqlite-orm-ledger.js';

const TRX = 'this Knex transaction';

/**
 * The part of Knex's client on better-sqlite3 oncemq calls (Knex's own, or the one under MikroORM 6):
 * its pool (of one connection, unless the application configured more), through which the ledger
 * borrows the connection as Knex's own queries do.
 */
export interface KnexSqliteClientLike {
  /** `better-sqlite3`. */
  readonly driverName?: unknown;
  /** The connection settings. */
  readonly connectionSettings?: {
    /** The database file; `:memory:` (or empty) for a database in memory, private to its connection. */
    readonly filename?: unknown;
  };
  /** Takes a connection (a better-sqlite3 `Database`) from the pool, waiting for a free one; in a transaction's client, the transaction's connection. */
  acquireConnection(): Promise<unknown>;
  /** Gives a connection back to the pool. */
  releaseConnection(connection: unknown): unknown;
}

/** Whether `client` keeps a database in memory, private to its connection. */
export function knexSqliteInMemory(client: KnexSqliteClientLike): boolean {
  const filename = client.connectionSettings?.filename;
  return filename === ':memory:' || filename === '';
}

/** A connection Knex lent: a better-sqlite3 `Database`, or a refusal. */
export function lentConnection(connection: unknown): SqliteDatabaseLike {
  if (!isSqliteDatabase(connection)) {
    throw new ConfigError('knex', 'Knex lent a connection that is not a better-sqlite3 Database');
  }
  return connection;
}

/** Runs `work` on a connection borrowed from the pool of `client`, given back when work settles. */
export async function holdPooled<T>(
  client: KnexSqliteClientLike,
  work: (db: SqliteDatabaseLike) => T | Promise<T>,
): Promise<T> {
  const connection = await client.acquireConnection();
  try {
    return await work(lentConnection(connection));
  } finally {
    await client.releaseConnection(connection);
  }
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

/** What a Knex transaction (`trx`) has beyond what the PostgreSQL and MySQL bridges call. */
interface KnexSqliteTransactionLike {
  readonly isTransaction?: unknown;
  isCompleted?(): unknown;
  readonly client?: { acquireConnection?(): Promise<unknown> };
}

/**
 * The client of `trx`, an open Knex transaction (it answers the transaction's connection); the knex
 * instance, or a transaction that has ended, is refused at once.
 */
function transactionClient(trx: unknown): { acquireConnection(): Promise<unknown> } {
  const shape = trx as KnexSqliteTransactionLike | null;
  const client = shape?.client;
  if (shape?.isTransaction !== true || typeof client?.acquireConnection !== 'function') {
    throw new ConfigError(
      'tx',
      'expected a Knex transaction (the `trx` of knex.transaction(), or ctx.tx), not the knex instance: ' +
        'its writes would wait for the connection the claim holds, or commit on their own outside the claim’s transaction',
    );
  }
  if (shape.isCompleted?.() === true) throw transactionEnded(TRX);
  return client as { acquireConnection(): Promise<unknown> };
}

/** The better-sqlite3 connection under `trx`, an open Knex transaction, checked open. */
async function transactionDatabase(trx: unknown): Promise<SqliteDatabaseLike> {
  const connection = await transactionClient(trx).acquireConnection();
  return openTransaction(lentConnection(connection), TRX);
}

/**
 * The better-sqlite3 connection of Knex's pool, lent to the SQLite ledger: it borrows the connection
 * from the pool for each operation, as Knex's own queries do, and each transactional claim is one
 * `knex.transaction()` (Knex's `BEGIN`), whose `trx` is the handler's `ctx.tx`. While a claim's
 * transaction is open nothing else of the application runs on that connection: its other queries wait
 * for Knex's pool, as they wait for any transaction of its own.
 */
export function knexSqlite<Tx extends KnexTransactionLike>(knex: KnexLike<Tx>): SqliteOrm<Tx> {
  const client = sqliteClient(knex);
  const source: SqliteConnectionSource<SqliteDatabaseLike, Tx> = {
    memory: knexSqliteInMemory(client),
    hold: (work) => holdPooled(client, work),
    transaction: (work) => knex.transaction(async (trx) => work(await transactionDatabase(trx), trx)),
    database: (tx) => transactionDatabase(tx),
  };
  return { source, checkTransaction: (tx) => void transactionClient(tx) };
}
