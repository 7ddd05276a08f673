import { ConfigError } from '../core/errors.js';
import { ConnectionQueue } from '../ledger/sqlite/connection-queue.js';
import type { SqliteConnectionSource } from '../ledger/sqlite/sqlite-connection-source.js';
import type { SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';
import { holdPooled, knexSqliteInMemory, lentConnection, type KnexSqliteClientLike } from './knex-sqlite.js';
import type { MikroOrmEntityManagerLike } from './mikro-orm-bridge.js';
import type { SqliteOrm } from './sqlite-orm-ledger.js';

/** The Knex client of `em`'s connection, when there is one. */
function knexClient(em: MikroOrmEntityManagerLike): KnexSqliteClientLike | undefined {
  try {
    return em.getConnection().getKnex?.().client as KnexSqliteClientLike | undefined;
  } catch {
    return undefined;
  }
}

/** Whether `em` is MikroORM 6 on better-sqlite3 (`@mikro-orm/better-sqlite`). */
export function isMikroOrmSqlite(em: MikroOrmEntityManagerLike): boolean {
  return knexClient(em)?.driverName === 'better-sqlite3';
}

/** One turn-taking queue per ORM (its Knex client): every oncemq ledger on its connection waits in it. */
const queues = new WeakMap<object, ConnectionQueue>();

/**
 * The better-sqlite3 connection of MikroORM's `@mikro-orm/better-sqlite` under `em` (`orm.em`), lent to
 * the SQLite ledger through MikroORM: each claim's transaction opens with `em.fork().transactional()`
 * (so MikroORM's transaction context, and its flush before the commit, know of it) and the handler gets
 * its EntityManager; the ledger's other statements take the connection from Knex's pool (of one), so
 * they never run inside a transaction of the application.
 */
export function mikroOrmSqlite<Em extends MikroOrmEntityManagerLike>(em: Em): SqliteOrm<Em> {
  const client = knexClient(em);
  if (client === undefined)
    throw new ConfigError('em', 'expected the EntityManager of @mikro-orm/better-sqlite');
  /** The Knex transaction of `tx`, an EntityManager of this ORM inside an open transaction. */
  const transactionOf = (tx: Em): { readonly client: KnexSqliteClientLike } => {
    const inTransaction = (tx as Partial<MikroOrmEntityManagerLike> | null)?.isInTransaction;
    const ctx = (
      typeof inTransaction === 'function' && tx.isInTransaction() ? tx.getTransactionContext() : undefined
    ) as { client?: KnexSqliteClientLike; isCompleted?: () => boolean } | null | undefined;
    if (ctx?.client === undefined || ctx.isCompleted?.() === true) {
      throw new ConfigError(
        'tx',
        'expected the EntityManager of a MikroORM transaction (the `em` of em.transactional(), or ctx.tx), not ' +
          'orm.em outside a transaction, a fork, nor the EntityManager of a transaction that has ended (or is ' +
          'disableTransactions set?): outside the claim’s transaction its writes would commit on their own',
      );
    }
    if (knexClient(tx) !== client) {
      throw new ConfigError(
        'tx',
        'expected an EntityManager of the MikroORM instance the ledger was built on: another one’s writes are ' +
          'outside the claim’s transaction',
      );
    }
    return ctx as { readonly client: KnexSqliteClientLike };
  };
  let queue = queues.get(client);
  if (queue === undefined) {
    queue = new ConnectionQueue();
    queues.set(client, queue);
  }
  /** Refuses to wait for the connection that a transaction of the caller's own holds: it would wait for ever. */
  const outsideTransaction = (): void => {
    if (em.isInTransaction()) {
      throw new ConfigError(
        'tx',
        'this runs inside a MikroORM transaction of the application, which holds the ORM’s one SQLite connection: ' +
          'claim in it with ledger.join(em)',
      );
    }
  };
  /** The connection of `tx`'s transaction. */
  const database = async (tx: Em): Promise<SqliteDatabaseLike> =>
    lentConnection(await transactionOf(tx).client.acquireConnection());
  const source: SqliteConnectionSource<SqliteDatabaseLike, Em> = {
    memory: knexSqliteInMemory(client),
    queue,
    hold(work) {
      outsideTransaction();
      return holdPooled(client, work);
    },
    transaction: async (work) => {
      outsideTransaction();
      return em.fork().transactional(async (tx) => work(await database(tx), tx));
    },
    database,
  };
  return { source, checkTransaction: (tx) => void transactionOf(tx) };
}
