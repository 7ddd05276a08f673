import { ConfigError, LedgerUnavailableError } from '../core/errors.js';
import { ConnectionQueue } from '../ledger/sqlite/connection-queue.js';
import type { SqliteConnectionSource } from '../ledger/sqlite/sqlite-connection-source.js';
import type { SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';
import type { SqliteOrm } from './sqlite-orm-ledger.js';
import type { TypeormDataSourceLike, TypeormEntityManagerLike } from './typeorm-bridge.js';

/** What TypeORM's better-sqlite3 driver keeps: one connection and one query runner for the whole data source. */
interface TypeormSqliteDriverLike {
  /** The better-sqlite3 `Database` every statement of the data source runs on (once initialized). */
  readonly databaseConnection?: SqliteDatabaseLike;
  /** The one query runner the driver hands out, once asked for. */
  readonly queryRunner?: { readonly isTransactionActive?: boolean };
}

/** Whether `dataSource` is TypeORM on better-sqlite3 (`type: 'better-sqlite3'`). */
export function isTypeormSqlite(dataSource: TypeormDataSourceLike): boolean {
  return (dataSource as { options?: { type?: unknown } } | null)?.options?.type === 'better-sqlite3';
}

/** One turn-taking queue per data source: every oncemq ledger on its connection waits in it. */
const queues = new WeakMap<object, ConnectionQueue>();

const FOREIGN_TRANSACTION =
  'a transaction the ledger did not open is running on the only connection of the TypeORM data source ' +
  '(better-sqlite3), and a claim inside it would commit or roll back with it; inside a transaction of ' +
  'your own, claim with ledger.join(manager)';

/**
 * The connection of TypeORM's better-sqlite3 data source `dataSource`, lent to the SQLite ledger:
 * transactions open with `dataSource.transaction()` (so TypeORM's query runner knows of them and
 * `manager.save()` opens no transaction of its own), and the handler gets their `EntityManager`. TypeORM
 * runs every statement of the data source on one connection and does not make transactions take turns:
 * a claim that finds a transaction open there (the application's) is refused with a
 * LedgerUnavailableError, never nested in it.
 */
export function typeormSqlite<Tx extends TypeormEntityManagerLike>(
  dataSource: TypeormDataSourceLike<Tx>,
): SqliteOrm<Tx> {
  const driver = (): TypeormSqliteDriverLike =>
    (dataSource as { driver?: TypeormSqliteDriverLike }).driver ?? {};
  const connection = (): SqliteDatabaseLike => {
    const db = driver().databaseConnection;
    if (db === undefined) {
      throw new ConfigError(
        'dataSource',
        'the TypeORM data source is not initialized: await dataSource.initialize() first',
      );
    }
    return db;
  };
  /** The connection, when no transaction is open on it. */
  const idle = (): SqliteDatabaseLike => {
    const db = connection();
    if (db.inTransaction || driver().queryRunner?.isTransactionActive === true) {
      throw new LedgerUnavailableError(FOREIGN_TRANSACTION);
    }
    return db;
  };
  const database = (tx: Tx): SqliteDatabaseLike => {
    const manager = tx as { dataSource?: unknown; queryRunner?: { isTransactionActive?: unknown } } | null;
    if (manager?.dataSource !== dataSource) {
      throw new ConfigError(
        'tx',
        'expected an EntityManager of the TypeORM data source the ledger was built on (ctx.tx, or the `manager` of ' +
          'its dataSource.transaction()): another data source’s writes are outside the claim’s transaction',
      );
    }
    const db = connection();
    if (manager.queryRunner?.isTransactionActive !== true || !db.inTransaction) {
      throw new ConfigError(
        'tx',
        'expected the EntityManager of a TypeORM transaction (the `manager` of dataSource.transaction(), or ctx.tx), ' +
          'not dataSource.manager nor a manager whose transaction has ended: outside the claim’s transaction its ' +
          'writes would commit on their own',
      );
    }
    return db;
  };
  let queue = queues.get(dataSource);
  if (queue === undefined) {
    queue = new ConnectionQueue();
    queues.set(dataSource, queue);
  }
  const source: SqliteConnectionSource<SqliteDatabaseLike, Tx> = {
    memory: (dataSource.options as { database?: unknown }).database === ':memory:',
    queue,
    hold: async (work) => work(idle()),
    transaction: async (work) => {
      const db = idle();
      return dataSource.transaction((manager) => work(db, manager));
    },
    database,
  };
  return { source, checkTransaction: (tx) => void database(tx) };
}
