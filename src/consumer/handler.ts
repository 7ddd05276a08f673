import { ConfigError } from '../core/errors.js';
import type { HandlerContext } from './handler-context.js';

/** Applies the business effect of one message. Its return value is stored and replayed to duplicates. */
export type Handler<Tx, T> = (message: T, context: HandlerContext<Tx>) => unknown;

/** One event of a batch handler's batch: its decoded message and the context a handler would get. */
export interface BatchEvent<Tx, T> {
  /** The decoded message, as a handler would get it. */
  readonly message: T;
  /** This event's own context: its envelope, key and attempt; `context.tx` is the batch's one transaction. */
  readonly context: HandlerContext<Tx>;
}

/** What a batch handler gets beside its events: the one transaction they all share. */
export interface BatchContext<Tx> {
  /**
   * The claim's transaction, shared by the whole batch: write every event's effect through it, so
   * the ledger rows and the effects commit, or roll back, together.
   */
  readonly tx: Tx;
  /** The pipeline's consumer group. */
  readonly group: string;
}

/**
 * Applies the business effect of the won events of a batch at once, inside the claim's transaction
 * (one business statement for many events). Returns one result per event, in order (stored and
 * replayed to duplicates), or nothing.
 *
 * Where it runs (a pipeline's `batchHandler`, transactional mode only):
 * - `processBatch(envelopes)` on a ledger with batch claims (SQLite, PostgreSQL, MySQL): the batch's
 *   claims are one statement; the events whose claim was won (never duplicates, busy keys or
 *   conflicts) come here at once, with `context.tx` the one transaction; one commit follows.
 * - A throw (or a result array of the wrong length) rolls the whole batch back, ledger rows included;
 *   every delivery of it is then processed on its own, through `handler` when there is one, else
 *   through this with a batch of one event, so one poison message fails alone.
 * - `process(envelope)`, and a ledger without batch claims, call `handler`; without a `handler`, this
 *   with a batch of one event.
 *
 * @example
 * ```ts
 * batchHandler: (events, { tx }) => {
 *   const add = tx.prepare(
 *     'INSERT INTO points VALUES (?, 100) ON CONFLICT (user_id) DO UPDATE SET balance = balance + 100',
 *   );
 *   for (const { message } of events) add.run(message.userId);
 * },
 * ```
 */
export type BatchHandler<Tx, T> = (
  events: readonly BatchEvent<Tx, T>[],
  context: BatchContext<Tx>,
) => unknown;

/** The results of a batch handler, checked: one per event, or none at all. */
export function batchResults(results: unknown, count: number): readonly unknown[] {
  if (results === undefined) return new Array<unknown>(count).fill(undefined);
  if (!Array.isArray(results) || results.length !== count) {
    throw new ConfigError(
      'batchHandler',
      `must return one result per event (${count}) or nothing, got ${Array.isArray(results) ? `${results.length} results` : typeof results}`,
    );
  }
  return results;
}
