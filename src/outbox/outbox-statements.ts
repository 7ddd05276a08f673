import type { SqlValue } from '../sql/sql-value.js';
import { ROW_COLUMNS } from './dialects/outbox-sql.js';
import type { ResolvedOutboxConfig } from './outbox-config.js';

/** Rows deleted per cleanup statement. */
export const CLEANUP_BATCH = 1000;

/** The statements of the outbox, written once per database from its resolved names. */
export interface OutboxStatements {
  readonly insert: string;
  /** Takes the next sequence number of an ordering key, locking its row until the caller's commit. */
  readonly nextSeq: string;
  /** MySQL reads the number back with a second statement; `undefined` where `nextSeq` returns it. */
  readonly readSeq: string | undefined;
  readonly notify: string | undefined;
  readonly probe: string;
  /**
   * Pending rows that may go now: due, not leased by a live relay, and the first unsent row of their
   * ordering key (a later row waits until every earlier one of its key is sent). A plain read: the
   * locking read of {@link lock} decides.
   */
  readonly candidates: (count: number, ids?: number) => string;
  /** Locks the candidates still free, skipping rows another relay is claiming. */
  readonly lock: (count: number) => string;
  readonly lease: (count: number) => string;
  /** Whether the claim reads the candidates with a plain `SELECT` first (SQLite: an idle relay takes no write lock). */
  readonly readBeforeClaim: boolean;
  /**
   * The claim as one statement, `UPDATE … WHERE id IN (…) RETURNING` (`undefined` on MySQL, which has
   * no `UPDATE … RETURNING`): on PostgreSQL the inner `SELECT … FOR UPDATE SKIP LOCKED` locks the
   * candidates still free; on SQLite the statement is atomic in autocommit, so that no write lock is
   * held while the event loop turns. Its values come from {@link claimValues}.
   */
  readonly claim: ((count: number, ids?: number) => string) | undefined;
  readonly claimValues: (
    owner: string,
    leaseUntil: number,
    now: number,
    ids: readonly string[],
  ) => SqlValue[];
  readonly markSent: (count: number) => string;
  readonly release: string;
  readonly cleanup: string;
}

export function outboxStatements(config: ResolvedOutboxConfig<unknown>): OutboxStatements {
  const { dialect, sql, messages, keys, channel } = config;
  const p = (n: number): string => dialect.placeholder(n);
  const list = (from: number, count: number): string =>
    Array.from({ length: count }, (_, i) => p(from + i)).join(', ');
  const free = (at: number): string => `(lease_until IS NULL OR lease_until < ${p(at)})`;
  const candidates = (count: number, ids = 0): string =>
    // Placeholders appear in the order of their values: `?` binds by position.
    `SELECT o.id FROM ${messages} o WHERE o.sent_at IS NULL AND o.available_at <= ${p(1)} ` +
    `AND (o.lease_until IS NULL OR o.lease_until < ${p(2)}) AND (o.ordering_key IS NULL OR NOT EXISTS ` +
    `(SELECT 1 FROM ${messages} e WHERE e.ordering_key = o.ordering_key AND e.seq < o.seq AND e.sent_at IS NULL)) ` +
    (ids > 0 ? `AND o.message_id IN (${list(3, ids)}) ` : '') +
    `ORDER BY o.id LIMIT ${count}`;
  const single = sql.claim;
  return {
    insert:
      `INSERT INTO ${messages} (message_id, topic, business_key, ordering_key, seq, headers, body, created_at, available_at, attempts) ` +
      `VALUES (${list(1, 9)}, 0)`,
    nextSeq: sql.nextSeq(keys),
    readSeq: sql.readSeq(keys),
    notify: channel === undefined ? undefined : `SELECT pg_notify(${p(1)}, '')`,
    probe: `SELECT id FROM ${messages} WHERE 1 = 0`,
    candidates,
    lock: (count) =>
      `SELECT ${ROW_COLUMNS} FROM ${messages} WHERE sent_at IS NULL AND ${free(1)} AND id IN (${list(2, count)}) ORDER BY id${sql.skipLocked}`,
    lease: (count) =>
      `UPDATE ${messages} SET lease_owner = ${p(1)}, lease_until = ${p(2)}, attempts = attempts + 1 WHERE id IN (${list(3, count)})`,
    readBeforeClaim: sql.readBeforeClaim,
    claim:
      single === undefined
        ? undefined
        : (count: number, ids = 0) => single.sql(config, candidates(count, ids), ids),
    claimValues: (owner, leaseUntil, now, ids) =>
      single === undefined ? [] : single.values(owner, leaseUntil, now, ids),
    markSent: (count) =>
      `UPDATE ${messages} SET sent_at = ${p(1)}, lease_owner = NULL, lease_until = NULL, last_error = NULL ` +
      `WHERE lease_owner = ${p(2)} AND id IN (${list(3, count)})`,
    release:
      `UPDATE ${messages} SET lease_owner = NULL, lease_until = NULL, available_at = ${p(1)}, last_error = ${p(2)} ` +
      `WHERE id = ${p(3)} AND lease_owner = ${p(4)}`,
    cleanup: sql.cleanup(messages, CLEANUP_BATCH),
  };
}
