import type { MysqlConnectionLike } from '../ledger/mysql/mysql-client.js';
import type { PgClientLike } from '../ledger/postgres/postgres-client.js';
import type { SqlBridge } from '../ledger/sql-bridge.js';

/** The driver-shaped connection a ledger's statements run on, over a tool. */
export type ToolConnection = PgClientLike | MysqlConnectionLike;

/** The bridge of a tool on PostgreSQL or on MySQL/MariaDB, whichever it talks to. */
export type ToolBridge<Tx> = SqlBridge<PgClientLike, Tx> | SqlBridge<MysqlConnectionLike, Tx>;

/** What an ORM or query builder brings to {@link toolBridge}. */
export interface ToolParts<Tx, Key extends object> {
  /** Which database the tool talks to. */
  readonly database: 'postgres' | 'mysql';
  /** The connection of single statements outside any transaction. */
  readonly autocommit: ToolConnection;
  /** Runs `work` in a new transaction of the tool: committed when it resolves, rolled back when it throws. */
  open<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * What identifies the transaction of `tx` (the tx itself, its query runner, its driver
   * transaction); a ConfigError for what is not an open transaction of the tool.
   */
  transactionOf(tx: Tx): Key;
  /** The connection whose statements run in that transaction. */
  over(key: Key, tx: Tx): ToolConnection;
  /** Runs `work` in a transaction held for a session lock (see {@link SqlBridge.hold}). @default open */
  hold?<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
}

/**
 * The bridge of an ORM or query builder: transactions open through the tool, the handler gets the
 * tool's transaction, and each transaction's connection is made once (checked by `transactionOf`)
 * and kept with it for the ledger's statements, `ledger.dialect` and the outbox.
 */
export function toolBridge<Tx, Key extends object>(parts: ToolParts<Tx, Key>): ToolBridge<Tx> {
  const connections = new WeakMap<Key, ToolConnection>();
  const connection = (tx: Tx): ToolConnection => {
    const key = parts.transactionOf(tx);
    let conn = connections.get(key);
    if (conn === undefined) {
      conn = parts.over(key, tx);
      connections.set(key, conn);
    }
    return conn;
  };
  const hold = parts.hold?.bind(parts);
  const bridge: SqlBridge<ToolConnection, Tx> = {
    database: parts.database,
    autocommit: parts.autocommit,
    transaction: (work) => parts.open((tx) => work(connection(tx), tx)),
    connection,
    ...(hold === undefined ? {} : { hold: (work) => hold((tx) => work(connection(tx))) }),
  };
  return bridge as ToolBridge<Tx>;
}
