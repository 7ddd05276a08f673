import { ConfigError, LedgerUnavailableError, OncemqError } from '../core/errors.js';
import type { MysqlConnectionLike, MysqlPoolLike } from '../ledger/mysql/mysql-client.js';
import type { PgPoolClientLike, PgPoolLike } from '../ledger/postgres/postgres-client.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';
import type { SqlDialect } from '../ledger/sql-dialect.js';
import type { SqliteDatabaseLike } from '../ledger/sqlite/sqlite-database.js';

/**
 * Where the relay (and `migrate`) opens transactions of its own: a pg `Pool`, a mysql2/promise
 * `Pool`, a better-sqlite3 `Database` of the relay's own (not the connection the application
 * writes through: SQLite has one transaction per connection), or — for an outbox on an ORM
 * ledger — the ORM's bridge (`knexBridge(knex)`, …), whose transactions the tool opens.
 */
export type OutboxDatabase = PgPoolLike | MysqlPoolLike | SqliteDatabaseLike | SqlBridge<unknown, unknown>;

function isBridge(database: OutboxDatabase): database is SqlBridge<unknown, unknown> {
  const shape = database as Partial<SqlBridge<unknown, unknown>>;
  return (
    typeof shape.connection === 'function' && typeof shape.transaction === 'function' && 'autocommit' in shape
  );
}

/**
 * Through an ORM's bridge: each transaction is one the tool opens, and the work gets the tool's
 * transaction (what the outbox's dialect runs on). No LISTEN: the relay polls. On MySQL the tool's
 * transactions run at its isolation level (the relay's claims are locking reads, which see the
 * latest commit at any level).
 */
function bridgeSession<Tx>(bridge: SqlBridge<unknown, Tx>): OutboxSession<Tx> {
  return {
    async transaction(work) {
      try {
        return await bridge.transaction((_conn, tx) => work(tx));
      } catch (error) {
        throw unavailable(error, 'in a transaction');
      }
    },
  };
}

/** A pg client that can LISTEN: what the relay calls beyond queries. */
interface PgListeningClientLike extends PgPoolClientLike {
  on(event: 'notification', listener: (message: { channel: string }) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** Transactions on one database, opened by the outbox itself. */
export interface OutboxSession<Tx> {
  /** Runs `work` in a transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * PostgreSQL: LISTENs on `channel` on a connection of its own; `wake` runs at each notification,
   * `lost` once when the connection fails. Answers how to stop listening.
   */
  listen?(channel: string, wake: () => void, lost: (error: Error) => void): Promise<() => Promise<void>>;
}

function unavailable(error: unknown, what: string): Error {
  if (error instanceof OncemqError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new LedgerUnavailableError(`the outbox database failed ${what}: ${message}`, { cause: error });
}

/**
 * PostgreSQL. With `relaxed`, the relay's own transactions (claims, marks) commit without waiting for
 * the WAL flush (`synchronous_commit = off`): a crash can lose only their last milliseconds, so a
 * lease or a mark is lost at worst and the row is published again, which consumers absorb. The
 * messages themselves are written by the caller's transaction, with its own durability.
 */
function postgresSession(pool: PgPoolLike, relaxed: boolean): OutboxSession<unknown> {
  const begin = relaxed ? 'BEGIN; SET LOCAL synchronous_commit TO OFF' : 'BEGIN';
  return {
    async transaction(work) {
      let client: PgPoolClientLike;
      try {
        client = await pool.connect();
      } catch (error) {
        throw unavailable(error, 'connecting');
      }
      try {
        await client.query(begin);
        const value = await work(client);
        const done = await client.query('COMMIT');
        if (done.command === 'ROLLBACK')
          throw new LedgerUnavailableError('the outbox transaction was aborted');
        client.release();
        return value;
      } catch (error) {
        await client.query('ROLLBACK').then(
          () => client.release(),
          () => client.release(true),
        );
        throw unavailable(error, 'in a transaction');
      }
    },
    async listen(channel, wake, lost) {
      const client = (await pool.connect()) as PgListeningClientLike;
      let open = true;
      client.on('notification', (message) => {
        if (message.channel === channel) wake();
      });
      client.on('error', (error) => {
        if (!open) return;
        open = false;
        client.release(error);
        lost(error);
      });
      try {
        await client.query(`LISTEN "${channel}"`);
      } catch (error) {
        open = false;
        client.release(true);
        throw unavailable(error, 'listening');
      }
      return async () => {
        if (!open) return;
        open = false;
        await client.query(`UNLISTEN "${channel}"`).then(
          () => client.release(),
          () => client.release(true),
        );
      };
    },
  };
}

function mysqlSession(pool: MysqlPoolLike): OutboxSession<unknown> {
  return {
    async transaction(work) {
      let conn: MysqlConnectionLike & { release(): void };
      try {
        conn = await pool.getConnection();
      } catch (error) {
        throw unavailable(error, 'connecting');
      }
      try {
        // Locking reads see the latest commit either way; plain reads too under READ COMMITTED.
        await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        await conn.query('START TRANSACTION');
        const value = await work(conn);
        await conn.query('COMMIT');
        return value;
      } catch (error) {
        await conn.query('ROLLBACK').catch(() => undefined);
        throw unavailable(error, 'in a transaction');
      } finally {
        conn.release();
      }
    },
  };
}

/**
 * SQLite: the relay's work runs statement by statement in autocommit on a connection of its own,
 * each statement atomic (the claim is one `UPDATE … RETURNING`). Holding `BEGIN` across an `await`
 * would keep the write lock while the event loop turns, and another connection of the same process
 * waiting for it synchronously would never let it go.
 */
function sqliteSession(db: SqliteDatabaseLike, begin: boolean): OutboxSession<unknown> {
  let queue: Promise<unknown> = Promise.resolve();
  const inTransaction = (): boolean => db.inTransaction;
  return {
    transaction(work) {
      const run = async (): Promise<Awaited<ReturnType<typeof work>>> => {
        if (inTransaction()) {
          throw new ConfigError(
            'database',
            'the SQLite connection is inside a transaction: give the outbox a connection of its own (new Database(file))',
          );
        }
        if (begin) db.exec('BEGIN IMMEDIATE');
        try {
          const value = await work(db);
          if (begin) db.exec('COMMIT');
          return value;
        } catch (error) {
          if (inTransaction()) db.exec('ROLLBACK');
          throw begin ? error : unavailable(error, 'running a statement');
        }
      };
      const next = queue.then(run, run);
      queue = next.catch(() => undefined);
      return next;
    },
  };
}

/**
 * Opens transactions on `database` the way `dialect`'s database wants them; a mismatch is refused.
 * On SQLite the relay's statements run in autocommit (see sqliteSession) unless `atomic` asks for
 * real transactions (the caller's work spans several statements that must commit together).
 */
export function openOutboxSession<Tx>(
  dialect: SqlDialect<Tx>,
  database: OutboxDatabase,
  atomic = false,
): OutboxSession<Tx> {
  const shape = database as Partial<PgPoolLike & MysqlPoolLike & SqliteDatabaseLike> | null;
  const expect = (ok: boolean, what: string): void => {
    if (!ok) throw new ConfigError('database', `the ${dialect.name} outbox needs ${what}`);
  };
  if (isBridge(database)) {
    expect(database.database === dialect.name, `a bridge to ${dialect.name}, not to ${database.database}`);
    return bridgeSession(database as SqlBridge<unknown, Tx>);
  }
  switch (dialect.name) {
    case 'postgres':
      expect(typeof shape?.connect === 'function', 'a pg Pool (its connect() is missing)');
      return postgresSession(database as PgPoolLike, !atomic) as OutboxSession<Tx>;
    case 'mysql':
      expect(
        typeof shape?.getConnection === 'function',
        'a mysql2/promise Pool (its getConnection() is missing)',
      );
      return mysqlSession(database as MysqlPoolLike) as OutboxSession<Tx>;
    case 'sqlite':
      expect(
        typeof shape?.prepare === 'function' && typeof shape.exec === 'function',
        'a better-sqlite3 Database of its own',
      );
      return sqliteSession(database as SqliteDatabaseLike, atomic) as OutboxSession<Tx>;
  }
}
