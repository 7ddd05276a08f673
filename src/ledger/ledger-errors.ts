import { CommitRejectedError, errorText, LedgerUnavailableError, OncemqError } from '../core/errors.js';
import { unreachableCause, unreachableMessage } from '../core/unreachable.js';

/** MySQL / MariaDB errors that mean the data broke a rule, not that the server failed. */
const MYSQL_CONSTRAINT_CODES: ReadonlySet<string> = new Set([
  'ER_DUP_ENTRY',
  'ER_NO_REFERENCED_ROW',
  'ER_NO_REFERENCED_ROW_2',
  'ER_ROW_IS_REFERENCED',
  'ER_ROW_IS_REFERENCED_2',
  'ER_CHECK_CONSTRAINT_VIOLATED',
  'ER_CONSTRAINT_FAILED',
  'ER_BAD_NULL_ERROR',
]);

/**
 * Whether a driver error says the data broke a constraint (PostgreSQL SQLSTATE class 23, SQLite's
 * `SQLITE_CONSTRAINT*`, MySQL's duplicate-key, foreign-key, check and not-null errors): the database
 * works and refused what was asked.
 */
export function isConstraintViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return (
    /^23[0-9A-Z]{3}$/.test(code) || code.startsWith('SQLITE_CONSTRAINT') || MYSQL_CONSTRAINT_CODES.has(code)
  );
}

/**
 * A driver failure as the caller sees it: oncemq's own errors pass; a constraint the data broke is a
 * {@link CommitRejectedError} (charged to the message); anything else is a
 * {@link LedgerUnavailableError} (the database failed: retried without charging the message).
 */
export function ledgerFailure(error: unknown, message: string): Error {
  if (error instanceof OncemqError) return error;
  if (isConstraintViolation(error)) return new CommitRejectedError(message, { cause: error });
  return new LedgerUnavailableError(message, { cause: error });
}

/** The `host:port` a socket error names, when it names them. */
function socketAddress(error: Error): string | undefined {
  const { address, port } = error as { address?: unknown; port?: unknown };
  return typeof address === 'string' && typeof port === 'number' ? `${address}:${port}` : undefined;
}

/**
 * A ledger that could not open because its server cannot be reached, as one {@link LedgerUnavailableError}
 * naming the server and where it was looked for (`url`, else the socket's address); `undefined` for
 * any other failure. `notConnected`: the client says it is not connected, so a failure without a
 * socket error (a command that timed out, a closed client) is one too.
 */
export function unreachableLedger(
  server: string,
  url: string | undefined,
  error: unknown,
  notConnected = false,
): LedgerUnavailableError | undefined {
  const down = unreachableCause(error);
  if (down === undefined && !notConnected) return undefined;
  const detail = down?.message ?? `the client is not connected: ${errorText(error)}`;
  const where = url ?? (down === undefined ? undefined : socketAddress(down)) ?? 'its configured address';
  return new LedgerUnavailableError(unreachableMessage({ server, url: where, detail }), { cause: error });
}
