import { ConfigError } from '../core/errors.js';
import type { ListQuery } from './ledger.js';

/** Rows a `list` returns when the query names no limit. */
export const DEFAULT_LIST_LIMIT = 100;

/** The filter of a `list` query, with `?` placeholders in the order of `values`. */
export interface ListFilter {
  /** ` WHERE …`, or empty when the query filters nothing. */
  readonly where: string;
  readonly values: (string | number | Date)[];
  readonly limit: number;
}

/**
 * Builds the filter every SQL ledger's `list` shares; `leaseValue` gives a lease deadline in the
 * column's own type (epoch milliseconds, or a Date for timestamptz).
 */
export function listFilter(query: ListQuery, leaseValue: (deadline: Date) => number | Date): ListFilter {
  const limit = query.limit ?? DEFAULT_LIST_LIMIT;
  if (!Number.isInteger(limit) || limit < 1) throw new ConfigError('limit', 'must be a positive integer');
  const conditions: string[] = [];
  const values: (string | number | Date)[] = [];
  if (query.group !== undefined) {
    conditions.push('consumer_group = ?');
    values.push(query.group);
  }
  if (query.status !== undefined) {
    conditions.push('status = ?');
    values.push(query.status);
  }
  if (query.leaseExpiredBefore !== undefined) {
    conditions.push(`status = 'PROCESSING' AND lease_until < ?`);
    values.push(leaseValue(query.leaseExpiredBefore));
  }
  return { where: conditions.length === 0 ? '' : ` WHERE ${conditions.join(' AND ')}`, values, limit };
}
