import { header, SERVER_STATUS_IN_TRANS, type MysqlConnectionLike } from './mysql-client.js';

/** A transaction in progress on one connection, and how to end it. */
export interface OpenMysqlTx<Conn extends MysqlConnectionLike> {
  readonly conn: Conn;
  /** Joined the caller's open transaction through a savepoint. */
  readonly nested: boolean;
}

/**
 * Opens a transaction on `conn`, or, when `joinable` and the connection is already in one (the
 * server status of a no-op statement says so), a savepoint inside the caller's transaction.
 */
export async function beginMysqlTx<Conn extends MysqlConnectionLike>(
  conn: Conn,
  joinable: boolean,
): Promise<OpenMysqlTx<Conn>> {
  if (joinable) {
    const [probe] = await conn.query('DO 0');
    if (((header(probe).serverStatus ?? 0) & SERVER_STATUS_IN_TRANS) !== 0) {
      await conn.query('SAVEPOINT oncemq_claim');
      return { conn, nested: true };
    }
  }
  await conn.query('START TRANSACTION');
  return { conn, nested: false };
}

/** Rolls back (to the savepoint when nested); never throws, the original error matters more. */
export async function rollbackMysqlTx(tx: OpenMysqlTx<MysqlConnectionLike>): Promise<void> {
  try {
    await tx.conn.query(tx.nested ? 'ROLLBACK TO SAVEPOINT oncemq_claim' : 'ROLLBACK');
  } catch {
    // the connection is broken or the server already rolled back
  }
}

/** Commits, or releases the savepoint so the caller's transaction carries the claim to its commit. */
export async function commitMysqlTx(tx: OpenMysqlTx<MysqlConnectionLike>): Promise<void> {
  await tx.conn.query(tx.nested ? 'RELEASE SAVEPOINT oncemq_claim' : 'COMMIT');
}
