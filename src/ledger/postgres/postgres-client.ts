import { OncemqError } from '../../core/errors.js';
import { ledgerFailure } from '../ledger-errors.js';
import type { PgClientLike, PgQueryResultLike } from '../../sql/postgres-like.js';

export type {
  PgClientLike,
  PgPoolClientLike,
  PgPoolLike,
  PgQueryResultLike,
} from '../../sql/postgres-like.js';

/** A statement pg prepares once per connection under `name` (skipping parse and plan on later runs). */
export interface PgNamedStatement {
  readonly name: string;
  readonly text: string;
}

export type PgStatement = string | PgNamedStatement;

function send(client: PgClientLike, statement: PgStatement, values: unknown[]): Promise<PgQueryResultLike> {
  return typeof statement === 'string'
    ? client.query(statement, values)
    : client.query({ name: statement.name, text: statement.text, values });
}

/** A character a text array element escapes inside its double quotes. */
const ARRAY_SPECIAL = /["\\]/;
const ARRAY_SPECIALS = /["\\]/g;

/**
 * Text values as a PostgreSQL array literal, for a `$n::text[]` parameter (null and undefined as
 * NULL): the literal pg makes of an array, every element quoted. pg builds it element by element,
 * several intermediate strings each, which a batch statement of six arrays paid in garbage for
 * every row; here it is one join when nothing needs escaping, which is the usual case.
 */
export function pgTextArray(values: readonly (string | null | undefined)[]): string {
  if (values.length === 0) return '{}';
  for (const value of values) {
    if (value === null || value === undefined || ARRAY_SPECIAL.test(value)) {
      const elements = values.map((v) =>
        v === null || v === undefined ? 'NULL' : `"${v.replace(ARRAY_SPECIALS, '\\$&')}"`,
      );
      return `{${elements.join(',')}}`;
    }
  }
  return `{"${values.join('","')}"}`;
}

/** SQLSTATEs worth naming in messages: the caller retries the delivery later in every case. */
const SQLSTATE_HINTS: Readonly<Record<string, string>> = {
  '40001': 'serialization failure (the transaction is not READ COMMITTED?)',
  '40P01': 'deadlock detected',
  '42P01': 'the ledger table does not exist (run migrate() or init())',
  '57P01': 'the server is shutting down',
  '53300': 'too many connections',
};

/** Turns a pg failure into a LedgerUnavailableError with the driver error as `cause`; oncemq errors pass. */
export function pgFailure(error: unknown, what: string): Error {
  if (error instanceof OncemqError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const hint =
    typeof code === 'string' ? ` [${code}${SQLSTATE_HINTS[code] ? `: ${SQLSTATE_HINTS[code]}` : ''}]` : '';
  const message = error instanceof Error ? error.message : String(error);
  return ledgerFailure(error, `PostgreSQL ledger failed ${what}${hint}: ${message}`);
}

/** Runs a query, wrapping driver failures. */
export async function pgQuery<R>(
  client: PgClientLike,
  statement: PgStatement,
  values: unknown[],
  what: string,
): Promise<R[]> {
  try {
    return (await send(client, statement, values)).rows as R[];
  } catch (error) {
    throw pgFailure(error, what);
  }
}

/** Runs a statement, wrapping driver failures; answers the affected row count. */
export async function pgExecute(
  client: PgClientLike,
  statement: PgStatement,
  values: unknown[],
  what: string,
): Promise<number> {
  try {
    return (await send(client, statement, values)).rowCount ?? 0;
  } catch (error) {
    throw pgFailure(error, what);
  }
}
