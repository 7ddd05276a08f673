import { ConfigError } from '../core/errors.js';
import type { SqlDialect, SqlValue } from './sql-dialect.js';

/**
 * How a SQL ledger reaches its database through a tool the application already writes with — an
 * ORM or a query builder (Knex, Kysely, Drizzle, TypeORM, MikroORM) — so that the claim, the
 * handler's writes and the completion commit in one transaction *opened by that tool*, and the
 * handler's `ctx.tx` is the tool's own transaction object.
 *
 * `Conn` is the driver-shaped handle the ledger's statements run on (`PgClientLike`,
 * `MysqlConnectionLike`); an adapter builds it over the tool's raw-query call. `Tx` is the tool's
 * transaction type. A bridge holds no state of its own between calls: one serves every transaction.
 */
export interface SqlBridge<Conn, Tx> {
  /** Which database the tool talks to. */
  readonly database: 'postgres' | 'mysql';
  /** Runs single statements outside any transaction (leased claims, reads, maintenance). */
  readonly autocommit: Conn;
  /**
   * Runs `work` in a new transaction opened through the tool: `conn` runs the ledger's statements
   * in it and `tx` is the tool's transaction object. Commits when work resolves; rolls back and
   * rethrows work's error unchanged when it throws.
   */
  transaction<T>(work: (conn: Conn, tx: Tx) => Promise<T>): Promise<T>;
  /**
   * The connection of `tx`, a transaction the application opened with the tool (`ledger.join(tx)`,
   * `outbox.add(tx, …)`). Throws a ConfigError for anything that is not such a transaction — a bare
   * database handle would write outside the claim's transaction.
   */
  connection(tx: Tx): Conn;
  /**
   * Runs `work` on one connection of the tool held until work settles, for the ledger's own use and
   * never handed to a handler: a session lock's owner (the maintenance lock, MySQL's migration lock).
   * A tool whose transactions time out (Prisma) opens this one without the handlers' deadline, so
   * that a session lock is never left on a connection the tool took back. @default transaction
   */
  readonly hold?: <T>(work: (conn: Conn) => Promise<T>) => Promise<T>;
}

/** Runs `work` on a connection of `bridge` held until it settles ({@link SqlBridge.hold}). */
export function holdConnection<Conn, Tx, T>(
  bridge: SqlBridge<Conn, Tx>,
  work: (conn: Conn) => Promise<T>,
): Promise<T> {
  return bridge.hold === undefined ? bridge.transaction((conn) => work(conn)) : bridge.hold(work);
}

/** Thrown inside a tool's transaction callback to roll it back while answering `value`. */
class Discard extends Error {
  constructor(readonly value: unknown) {
    super('rolled back: the claim was not won');
  }
}

/**
 * Runs `fn` in a transaction of `bridge`: committed when `keep(value)`, rolled back otherwise (the
 * value is answered either way); rolled back with fn's error when it throws. `beforeCommit` runs
 * last inside a kept transaction (a check that it can still commit).
 */
export async function bridgeTransaction<Conn, Tx, T>(
  bridge: SqlBridge<Conn, Tx>,
  fn: (conn: Conn, tx: Tx) => Promise<T>,
  keep: (value: T) => boolean,
  beforeCommit?: (conn: Conn) => Promise<void>,
): Promise<T> {
  try {
    return await bridge.transaction(async (conn, tx) => {
      const value = await fn(conn, tx);
      if (!keep(value)) throw new Discard(value);
      await beforeCommit?.(conn);
      return value;
    });
  } catch (error) {
    if (error instanceof Discard) return error.value as T;
    throw error;
  }
}

/** A connection held in a transaction of the tool until `release()`. */
export type PinnedConnection<Conn> = Conn & { release(error?: unknown): void };

/**
 * A connection of `bridge` held for a while (a session lock's owner): a transaction of the tool kept
 * open until `release()`, which commits it. A tool hands out connections only inside transactions,
 * so this is how one is kept; nothing is written in it but what the caller runs.
 */
export function pinConnection<Conn extends object, Tx>(
  bridge: SqlBridge<Conn, Tx>,
): Promise<PinnedConnection<Conn>> {
  return new Promise((resolve, reject) => {
    let taken = false;
    holdConnection(
      bridge,
      (conn) =>
        new Promise<void>((done) => {
          taken = true;
          resolve(Object.assign(Object.create(conn) as Conn, { release: () => done() }));
        }),
    ).catch((error: unknown) => {
      if (!taken) reject(error instanceof Error ? error : new Error(String(error)));
    });
  });
}

/**
 * The dialect of a bridged ledger: `dialect`'s SQL, run on the connection of the tool's transaction
 * (`transition(ledger.dialect, ctx.tx, …)`, `outbox.add(ctx.tx, …)`).
 */
export function bridgedDialect<Conn, Tx>(
  dialect: SqlDialect<Conn>,
  bridge: SqlBridge<Conn, Tx>,
): SqlDialect<Tx> {
  return Object.freeze({
    name: dialect.name,
    lockingRead: dialect.lockingRead,
    quote: (identifier: string) => dialect.quote(identifier),
    placeholder: (n: number) => dialect.placeholder(n),
    execute: (tx: Tx, sql: string, values: readonly SqlValue[]) =>
      dialect.execute(bridge.connection(tx), sql, values),
    query: (tx: Tx, sql: string, values: readonly SqlValue[]) =>
      dialect.query(bridge.connection(tx), sql, values),
  });
}

/** Refuses a bridge for another database than the ledger's. */
export function checkBridge(bridge: SqlBridge<unknown, unknown>, database: 'postgres' | 'mysql'): void {
  if (bridge.database !== database) {
    throw new ConfigError(
      'bridge',
      `this tool talks to ${bridge.database}; use the ${bridge.database} ledger, not the ${database} one`,
    );
  }
}
