import { LedgerUnavailableError } from '../../core/errors.js';
import {
  pgFailure,
  pgQuery,
  type PgClientLike,
  type PgPoolClientLike,
  type PgPoolLike,
  type PgQueryResultLike,
} from './postgres-client.js';

/**
 * Runs `fn` in a transaction on a client checked out of `pool`: BEGIN, `fn`, then COMMIT when
 * `keep(value)` (else ROLLBACK). If `fn` throws, ROLLBACK and rethrow it unchanged. A client whose
 * ROLLBACK or COMMIT failed, or whose connection died while it was checked out, is destroyed
 * (`release(error)`), never returned to the pool.
 *
 * pg emits `error` on a checked-out client whose connection ends between two queries (a server
 * restart, `pg_terminate_backend`, a failover while the handler awaits something else); the pool
 * listens only to idle clients, so without a listener here that event would end the process. It is
 * kept and the transaction's next statement fails as the connection's loss.
 */
export async function pgTransaction<T>(
  pool: PgPoolLike,
  fn: (client: PgClientLike) => Promise<T>,
  keep: (value: T) => boolean,
): Promise<T> {
  let client: PgPoolClientLike;
  try {
    client = await pool.connect();
  } catch (error) {
    throw pgFailure(error, 'connecting');
  }
  let lost: Error | undefined;
  const onError = (error: Error): void => {
    lost ??= error;
  };
  client.on?.('error', onError);
  const release = (error?: Error | boolean): void => {
    client.removeListener?.('error', onError);
    client.release(error ?? lost);
  };
  let value: T;
  try {
    await pgQuery(client, 'BEGIN', [], 'beginning a transaction');
    value = await fn(client);
  } catch (error) {
    try {
      await client.query('ROLLBACK');
      release();
    } catch (rollbackError) {
      release(rollbackError instanceof Error ? rollbackError : true);
    }
    throw error;
  }
  const commit = keep(value);
  let done: PgQueryResultLike;
  try {
    done = await client.query(commit ? 'COMMIT' : 'ROLLBACK');
  } catch (error) {
    release(true);
    throw pgFailure(error, 'committing');
  }
  release();
  // COMMIT of a transaction an earlier statement aborted answers ROLLBACK instead of failing.
  if (commit && done.command === 'ROLLBACK') {
    throw new LedgerUnavailableError(
      'the transaction was aborted by an earlier failed statement (a database error caught inside the handler?); ' +
        'PostgreSQL rolled it back at COMMIT, so nothing was applied and the delivery must be retried',
    );
  }
  return value;
}

/**
 * Runs `fn` under a savepoint of the caller's open transaction on `client`: rolled back to the
 * savepoint if `fn` throws or `keep(value)` is false; the caller commits the transaction.
 */
export async function pgSavepoint<T>(
  client: PgClientLike,
  fn: (client: PgClientLike) => Promise<T>,
  keep: (value: T) => boolean,
): Promise<T> {
  await pgQuery(
    client,
    'SAVEPOINT oncemq_claim',
    [],
    'opening a savepoint (is the client inside a transaction?)',
  );
  let value: T;
  try {
    value = await fn(client);
  } catch (error) {
    await pgQuery(client, 'ROLLBACK TO SAVEPOINT oncemq_claim', [], 'rolling back to the savepoint');
    await pgQuery(client, 'RELEASE SAVEPOINT oncemq_claim', [], 'releasing the savepoint');
    throw error;
  }
  if (!keep(value)) {
    await pgQuery(client, 'ROLLBACK TO SAVEPOINT oncemq_claim', [], 'rolling back to the savepoint');
  }
  await pgQuery(client, 'RELEASE SAVEPOINT oncemq_claim', [], 'releasing the savepoint');
  return value;
}

/**
 * The last statement of a transaction that another tool commits (an ORM, a query builder): it fails
 * when an earlier statement aborted the transaction, whose COMMIT would otherwise answer ROLLBACK
 * without an error that the tool reports. The failure rolls the transaction back and the delivery is
 * retried, never acked.
 */
export async function pgCommitCheck(client: PgClientLike): Promise<void> {
  try {
    await client.query('SELECT 1');
  } catch (error) {
    // the tool's adapter already told why (a Prisma transaction ended by its timeout)
    if (error instanceof LedgerUnavailableError) throw error;
    throw new LedgerUnavailableError(
      'the transaction was aborted by an earlier failed statement (a database error caught inside the handler?), ' +
        'so it cannot commit: nothing was applied and the delivery must be retried',
      { cause: error },
    );
  }
}
