import { ConfigError, LedgerUnavailableError, OncemqError } from '../../core/errors.js';
import { sqlIdentifier } from '../sql-identifier.js';
import { ledgerFailure } from '../ledger-errors.js';

export type {
  MysqlConnectionLike,
  MysqlPoolConnectionLike,
  MysqlPoolLike,
  MysqlValue,
} from '../../sql/mysql-like.js';

/** The OK packet of a write as mysql2 reports it. */
export interface MysqlResultHeader {
  readonly affectedRows: number;
  readonly insertId: number;
  /** `Rows matched: 1  Changed: 0  Warnings: 0` for UPDATE. */
  readonly info?: string;
  readonly serverStatus?: number;
}

/** ER_LOCK_DEADLOCK: InnoDB rolled the whole transaction back. */
export const ER_LOCK_DEADLOCK = 1213;
/** ER_LOCK_WAIT_TIMEOUT: the statement (only) waited past innodb_lock_wait_timeout. */
export const ER_LOCK_WAIT_TIMEOUT = 1205;
/** SERVER_STATUS_IN_TRANS bit of an OK packet's server status. */
export const SERVER_STATUS_IN_TRANS = 1;

/** Longest table name: the schema-version table adds `_schema` and MySQL names stop at 64 characters. */
export const MAX_MYSQL_TABLE_LENGTH = 57;

export function header(result: unknown): MysqlResultHeader {
  const value = result as Partial<MysqlResultHeader> | null;
  if (value === null || typeof value !== 'object' || typeof value.affectedRows !== 'number') {
    throw new LedgerUnavailableError('the MySQL driver returned no OK packet for a write');
  }
  return value as MysqlResultHeader;
}

export function rows<T>(result: unknown): T[] {
  if (!Array.isArray(result))
    throw new LedgerUnavailableError('the MySQL driver returned no rows for a read');
  return result as T[];
}

/**
 * Rows an UPDATE matched, whatever the connection's CLIENT_FOUND_ROWS flag: with the flag
 * (mysql2's default) `affectedRows` counts matched rows, without it only changed rows; the
 * `info` text always carries the matched count.
 */
export function matchedRows(result: unknown): number {
  const h = header(result);
  const match = h.info === undefined ? null : /Rows matched: (\d+)/.exec(h.info);
  return match === null ? h.affectedRows : Number(match[1]);
}

function errno(error: unknown): number | undefined {
  const value = (error as { errno?: unknown } | null)?.errno;
  return typeof value === 'number' ? value : undefined;
}

/** A deadlock or lock-wait timeout: the claim transaction may be run again. */
export function isLockConflict(error: unknown): boolean {
  const n = errno(error);
  return n === ER_LOCK_DEADLOCK || n === ER_LOCK_WAIT_TIMEOUT;
}

export function isDeadlock(error: unknown): boolean {
  return errno(error) === ER_LOCK_DEADLOCK;
}

/** Turns a driver failure into LedgerUnavailableError; oncemq's own errors pass through. */
export function wrapMysqlError(error: unknown, what: string): Error {
  if (error instanceof OncemqError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return ledgerFailure(error, `MySQL ledger failed ${what}: ${message}`);
}

/** Validates a MySQL identifier from configuration and quotes it with backticks. */
export function mysqlIdentifier(value: unknown, field: string, maxLength = 64): string {
  const name = sqlIdentifier(value, field);
  if (name.length > maxLength) {
    throw new ConfigError(field, `'${name}' is longer than ${maxLength} characters`);
  }
  return `\`${name}\``;
}
