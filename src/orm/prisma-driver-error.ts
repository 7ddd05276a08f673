import { LedgerUnavailableError } from '../core/errors.js';

/** mysql2's names of the MySQL error numbers the ledgers tell apart (constraints, lock conflicts). */
const MYSQL_CODES: Readonly<Record<number, string>> = {
  1048: 'ER_BAD_NULL_ERROR',
  1062: 'ER_DUP_ENTRY',
  1205: 'ER_LOCK_WAIT_TIMEOUT',
  1213: 'ER_LOCK_DEADLOCK',
  1216: 'ER_NO_REFERENCED_ROW',
  1217: 'ER_ROW_IS_REFERENCED',
  1451: 'ER_ROW_IS_REFERENCED_2',
  1452: 'ER_NO_REFERENCED_ROW_2',
  3819: 'ER_CHECK_CONSTRAINT_VIOLATED',
  4025: 'ER_CONSTRAINT_FAILED',
};

/** What a Prisma driver adapter says of a failed statement (`meta.driverAdapterError.cause`). */
interface AdapterCause {
  readonly kind?: unknown;
  readonly type?: unknown;
  readonly originalCode?: unknown;
  readonly originalMessage?: unknown;
}

function adapterCause(error: unknown): AdapterCause | undefined {
  const value = error as {
    readonly name?: unknown;
    readonly cause?: unknown;
    readonly meta?: { readonly driverAdapterError?: { readonly cause?: unknown } };
  } | null;
  const cause =
    value?.meta?.driverAdapterError?.cause ??
    (value?.name === 'DriverAdapterError' ? value.cause : undefined);
  return typeof cause === 'object' && cause !== null ? cause : undefined;
}

/**
 * Prisma could not read a column of type `void` back (`SELECT pg_advisory_xact_lock(…)`,
 * `pg_notify`): the statement ran to its end, only its result has no value to give.
 */
export function isVoidColumnError(error: unknown): boolean {
  const cause = adapterCause(error);
  return cause?.kind === 'UnsupportedNativeDataType' && cause.type === 'void';
}

/** A database error in the shape the ledgers read from pg (`code`: the SQLSTATE) and mysql2 (`errno`, `code`). */
class DatabaseError extends Error {
  override name = 'DatabaseError';
  readonly code: string | undefined;
  readonly errno: number | undefined;

  constructor(message: string, code: string | undefined, errno: number | undefined, cause: unknown) {
    super(message, { cause });
    this.code = code;
    this.errno = errno;
  }
}

/**
 * A Prisma error as the ledger's statements expect a driver's: the database's own code (SQLSTATE on
 * PostgreSQL; the error number and mysql2's name for it on MySQL, so that a deadlock is retried and a
 * broken constraint charged to the message), with Prisma's error as `cause`. A transaction Prisma
 * already ended (P2028: past its timeout, or rolled back) is a LedgerUnavailableError: nothing was
 * applied and the delivery must be retried. Anything else passes unchanged.
 */
export function prismaDriverError(error: unknown, database: 'postgres' | 'mysql'): unknown {
  const code = (error as { readonly code?: unknown } | null)?.code;
  if (code === 'P2028') {
    const message = error instanceof Error ? error.message : String(error);
    return new LedgerUnavailableError(`the Prisma transaction is over: ${message}`, { cause: error });
  }
  const cause = adapterCause(error);
  if (typeof cause?.originalCode !== 'string') return error;
  const message =
    typeof cause.originalMessage === 'string'
      ? cause.originalMessage
      : error instanceof Error
        ? error.message
        : String(error);
  if (database === 'postgres') return new DatabaseError(message, cause.originalCode, undefined, error);
  const errno = Number(cause.originalCode);
  return new DatabaseError(message, MYSQL_CODES[errno], Number.isInteger(errno) ? errno : undefined, error);
}
