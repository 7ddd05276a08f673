import { ConfigError } from '../core/errors.js';
import type { SqlDialect, SqlValue } from './sql-dialect.js';
import { sqlIdentifier } from './sql-identifier.js';

/** A value bound in a transition: a status, an id or a `set` value. */
export type TransitionValue = SqlValue;

/** A state change of one business row, applied only from the expected states. */
export interface TransitionSpec {
  /** Table of the business row, optionally schema-qualified (`billing.orders`). */
  readonly table: string;
  /** Column that identifies the row. */
  readonly idColumn: string;
  /** The row's id, bound as a parameter. */
  readonly id: TransitionValue;
  /** Column holding the row's state. */
  readonly statusColumn: string;
  /** States the row may leave; anything else is rejected. */
  readonly from: TransitionValue | readonly TransitionValue[];
  /** The state the row moves to. A row already in it is a duplicate (`already`). */
  readonly to: TransitionValue;
  /** Other columns written with the change; names are validated, values bound. */
  readonly set?: Readonly<Record<string, TransitionValue>>;
}

/** What {@link transition} did to the row. */
export type TransitionResult =
  | {
      /** The row moved from one of `from` to `to`. */
      readonly status: 'applied';
    }
  | {
      /** The row is already in `to`: a duplicate of a change that happened before. */
      readonly status: 'already';
    }
  | {
      /** The row is in a state the change may not leave, or does not exist. */
      readonly status: 'rejected';
      /** The row's state as found, or `null` when there is no such row. */
      readonly current: unknown;
    };

function qualified(name: string, field: string, quote: (part: string) => string): string {
  const parts = typeof name === 'string' ? name.split('.') : [name];
  if (parts.length > 2) throw new ConfigError(field, `${JSON.stringify(name)} has more than one dot`);
  return parts.map((part) => quote(sqlIdentifier(part, field))).join('.');
}

/**
 * Moves one row from one of `from` to `to` with a conditional `UPDATE … WHERE id = ? AND status IN
 * (from)`, inside the caller's transaction `tx`, through `dialect`: the ledger's own
 * (`transition(ledger.dialect, ctx.tx, spec)`), or `postgresDialect`, `mysqlDialect`,
 * `sqliteDialect` for a transaction of your own. Only one of two concurrent identical transitions
 * applies; the other sees `already`. Driver errors propagate unchanged: the statement runs on the
 * caller's tables in the caller's transaction, like the caller's own SQL.
 */
export async function transition<Tx>(
  dialect: SqlDialect<Tx> | undefined,
  tx: Tx,
  spec: TransitionSpec,
): Promise<TransitionResult> {
  const shape = dialect as Partial<SqlDialect<Tx>> | null | undefined;
  if (typeof shape?.execute !== 'function' || typeof shape.query !== 'function' || dialect === undefined) {
    throw new ConfigError(
      'dialect',
      'pass the SQL dialect of the database: ledger.dialect of a SQL ledger, or postgresDialect, mysqlDialect, sqliteDialect',
    );
  }
  const q = (name: string): string => dialect.quote(name);
  const table = qualified(spec.table, 'table', q);
  const id = q(sqlIdentifier(spec.idColumn, 'idColumn'));
  const status = q(sqlIdentifier(spec.statusColumn, 'statusColumn'));
  const from = Array.isArray(spec.from)
    ? (spec.from as readonly TransitionValue[])
    : [spec.from as TransitionValue];
  if (from.length === 0) throw new ConfigError('from', 'name at least one state the row may leave');
  const set = Object.entries(spec.set ?? {});
  const assignments: string[] = [];
  const values: TransitionValue[] = [];
  const bind = (value: TransitionValue): string => {
    values.push(value);
    return dialect.placeholder(values.length);
  };
  assignments.push(`${status} = ${bind(spec.to)}`);
  for (const [column, value] of set) {
    const name = sqlIdentifier(column, `set.${column}`);
    if (name === spec.statusColumn || name === spec.idColumn) {
      throw new ConfigError(`set.${column}`, 'the status and id columns are not set through `set`');
    }
    assignments.push(`${q(name)} = ${bind(value)}`);
  }
  const where = `${id} = ${bind(spec.id)} AND ${status} IN (${from.map(bind).join(', ')})`;
  const changed = await dialect.execute(
    tx,
    `UPDATE ${table} SET ${assignments.join(', ')} WHERE ${where}`,
    values,
  );
  if (changed > 1) {
    throw new ConfigError(
      'idColumn',
      `${spec.idColumn} matched ${changed} rows of ${spec.table}; it must be unique`,
    );
  }
  if (changed === 1) return { status: 'applied' };
  const found = await dialect.query(
    tx,
    `SELECT ${status} AS current_status FROM ${table} WHERE ${id} = ${dialect.placeholder(1)}${dialect.lockingRead}`,
    [spec.id],
  );
  const row = found[0];
  if (row === undefined) return { status: 'rejected', current: null };
  const current = row.current_status;
  const text = (value: unknown): string => (Buffer.isBuffer(value) ? value.toString('utf8') : String(value));
  const same = text(current) === text(spec.to);
  return same ? { status: 'already' } : { status: 'rejected', current };
}
