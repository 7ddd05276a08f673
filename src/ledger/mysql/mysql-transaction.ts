import {
  header,
  isDeadlock,
  isLockConflict,
  SERVER_STATUS_IN_TRANS,
  wrapMysqlError,
  type MysqlConnectionLike,
} from './mysql-client.js';

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
  inTransaction = false,
): Promise<OpenMysqlTx<Conn>> {
  if (inTransaction) {
    await conn.query('SAVEPOINT oncemq_claim');
    return { conn, nested: true };
  }
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

/** The phases of a claim transaction. */
export interface ClaimTransactionSteps<Conn, C, R> {
  /** Join a transaction already open on the connection (savepoint) rather than open one. */
  readonly joinable: boolean;
  /** The connection is known to be inside the caller's transaction: a savepoint, without asking the server. */
  readonly inTransaction?: boolean;
  /** Times the claim phase runs again after a deadlock or a lock-wait timeout. */
  readonly lockRetries: number;
  /** Claims; `nested` when the claim joined the caller's transaction. Driver errors raw. */
  readonly claim: (conn: Conn, nested: boolean) => Promise<C>;
  readonly won: (claimed: C) => boolean;
  /** The handler's work and the storing of its results; its errors pass unchanged. */
  readonly finish: (conn: Conn, claimed: C, nested: boolean) => Promise<R>;
  /** The answer of a claim that won nothing (rolled back). */
  readonly lost: (claimed: C) => R;
  /** Told of each lock conflict that is retried. */
  readonly onRetry?: (error: unknown, round: number) => void;
}

/**
 * Runs a claim transaction on `conn`: the claim (again after a deadlock or lock-wait timeout, up to
 * lockRetries times), then, if won, the work, then commit. Anything not won is rolled back. A
 * deadlock inside the caller's own transaction is not retried: InnoDB rolled all of it back.
 */
export async function runClaimTransaction<Conn extends MysqlConnectionLike, C, R>(
  conn: Conn,
  steps: ClaimTransactionSteps<Conn, C, R>,
): Promise<R> {
  for (let round = 0; ; round++) {
    const tx = await beginMysqlTx(conn, steps.joinable, steps.inTransaction);
    let claimed: C;
    try {
      claimed = await steps.claim(conn, tx.nested);
    } catch (error) {
      await rollbackMysqlTx(tx);
      const resumable = !(tx.nested && isDeadlock(error));
      if (isLockConflict(error) && resumable && round < steps.lockRetries) {
        steps.onRetry?.(error, round + 1);
        continue;
      }
      throw wrapMysqlError(
        error,
        isLockConflict(error) ? `claiming (lock conflict ${round + 1} in a row)` : 'claiming',
      );
    }
    if (!steps.won(claimed)) {
      await rollbackMysqlTx(tx);
      return steps.lost(claimed);
    }
    let answer: R;
    try {
      answer = await steps.finish(conn, claimed, tx.nested);
    } catch (error) {
      await rollbackMysqlTx(tx);
      throw error;
    }
    try {
      await commitMysqlTx(tx);
    } catch (error) {
      await rollbackMysqlTx(tx);
      throw wrapMysqlError(error, 'committing');
    }
    return answer;
  }
}
