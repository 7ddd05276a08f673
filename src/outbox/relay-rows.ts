import { KEY_HEADER, ORDERING_KEY_HEADER } from '../core/envelope.js';
import type { SqlValue } from '../sql/sql-value.js';
import type { OutgoingMessage } from '../transport/transport.js';
import type { Outbox } from './outbox.js';
import type { OutboxSession } from './outbox-database.js';

/** Header carrying the outbox row's unique id: the same on every re-publish of the row. */
export const OUTBOX_ID_HEADER = 'oncemq-outbox-id';

/** A pending row a relay holds the lease of, about to be published. */
export interface RelayedMessage {
  /** The row's primary key in the outbox table. */
  readonly rowId: number;
  /** The row's unique id ({@link OUTBOX_ID_HEADER}). */
  readonly id: string;
  /** The topic it is published to. */
  readonly topic: string;
  /** The business key it carries. */
  readonly key: string;
  /** Its ordering key, if any: it is published only after every earlier row of that key is sent. */
  readonly orderingKey: string | undefined;
  /** Its position in its ordering key (1, 2, …); `undefined` without one. */
  readonly seq: number | undefined;
  /** Times a relay claimed this row, this claim included: above 1, the row may have been published before. */
  readonly attempts: number;
  /** The message as the relay publishes it: the outbox id, business key and ordering key in its headers. */
  readonly message: OutgoingMessage;
}

function bytes(value: unknown): Uint8Array {
  if (value instanceof Uint8Array) return value;
  return new TextEncoder().encode(String(value));
}

function text(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

/** A claimed row as the relay publishes it; `claimed` counts the claim that just happened in `attempts`. */
function relayed(row: Record<string, unknown>, counted: boolean): RelayedMessage {
  const id = text(row.message_id);
  const key = text(row.business_key);
  const orderingKey = row.ordering_key === null ? undefined : text(row.ordering_key);
  // Built by assignment, not by spreads among other properties: V8's slow path, taken once per row.
  const headers = JSON.parse(text(row.headers)) as Record<string, string>;
  headers[OUTBOX_ID_HEADER] = id;
  headers[KEY_HEADER] = key;
  if (orderingKey !== undefined) headers[ORDERING_KEY_HEADER] = orderingKey;
  const topic = text(row.topic);
  const message: { -readonly [K in keyof OutgoingMessage]: OutgoingMessage[K] } = {
    topic,
    key,
    headers,
    body: bytes(row.body),
  };
  if (orderingKey !== undefined) message.orderingKey = orderingKey;
  return {
    rowId: Number(row.id),
    id,
    topic,
    key,
    orderingKey,
    seq: row.seq === null ? undefined : Number(row.seq),
    attempts: Number(row.attempts) + (counted ? 0 : 1),
    message,
  };
}

/**
 * Claims up to `limit` rows that may go now (see `candidates`): locks them `FOR UPDATE SKIP LOCKED`
 * (rows another relay is claiming are skipped, not waited for) and leases them to `owner` until
 * `leaseUntil`, in one short transaction. `ids` limits the claim to those rows (inline dispatch).
 */
export function claimRows<Tx>(
  session: OutboxSession<Tx>,
  outbox: Outbox<Tx>,
  claim: { owner: string; now: number; leaseUntil: number; limit: number; ids?: readonly string[] },
): Promise<RelayedMessage[]> {
  const { dialect } = outbox;
  const statements = outbox.statements;
  const ids = claim.ids ?? [];
  const single = statements.claim;
  if (single !== undefined) {
    return session.transaction(async (tx) => {
      if (statements.readBeforeClaim) {
        // A plain read first: an idle SQLite relay never asks for the file's write lock.
        const found = await dialect.query(tx, statements.candidates(1, ids.length), [
          claim.now,
          claim.now,
          ...ids,
        ]);
        if (found.length === 0) return [];
      }
      const values = statements.claimValues(claim.owner, claim.leaseUntil, claim.now, ids);
      const rows = await dialect.query(tx, single(claim.limit, ids.length), values);
      return [...rows].sort((a, b) => Number(a.id) - Number(b.id)).map((row) => relayed(row, true));
    });
  }
  return session.transaction(async (tx) => {
    const found = await dialect.query(tx, statements.candidates(claim.limit, ids.length), [
      claim.now,
      claim.now,
      ...ids,
    ]);
    if (found.length === 0) return [];
    const rowIds = found.map((row) => Number(row.id));
    const locked = await dialect.query(tx, statements.lock(rowIds.length), [claim.now, ...rowIds]);
    if (locked.length === 0) return [];
    const lockedIds = locked.map((row) => Number(row.id));
    await dialect.execute(tx, statements.lease(lockedIds.length), [
      claim.owner,
      claim.leaseUntil,
      ...lockedIds,
    ]);
    return locked.map((row) => relayed(row, false));
  });
}

/** Marks published rows sent, where `owner` still holds their lease; answers how many it marked. */
export function markSent<Tx>(
  session: OutboxSession<Tx>,
  outbox: Outbox<Tx>,
  owner: string,
  rows: readonly RelayedMessage[],
): Promise<number> {
  if (rows.length === 0) return Promise.resolve(0);
  const values: SqlValue[] = [Date.now(), owner, ...rows.map((row) => row.rowId)];
  return session.transaction((tx) =>
    outbox.dialect.execute(tx, outbox.statements.markSent(rows.length), values),
  );
}

/** Gives back the lease of rows that failed to publish: tried again from `retryAt`, the error kept. */
export function releaseRows<Tx>(
  session: OutboxSession<Tx>,
  outbox: Outbox<Tx>,
  owner: string,
  failed: readonly { readonly row: RelayedMessage; readonly retryAt: number; readonly error: string }[],
): Promise<void> {
  if (failed.length === 0) return Promise.resolve();
  return session.transaction(async (tx) => {
    for (const { row, retryAt, error } of failed) {
      await outbox.dialect.execute(tx, outbox.statements.release, [
        retryAt,
        error.slice(0, 2000),
        row.rowId,
        owner,
      ]);
    }
  });
}

/** Deletes rows sent before `before`, in bounded statements; answers how many. */
export async function cleanSent<Tx>(
  session: OutboxSession<Tx>,
  outbox: Outbox<Tx>,
  before: number,
  batch: number,
): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await session.transaction((tx) =>
      outbox.dialect.execute(tx, outbox.statements.cleanup, [before]),
    );
    total += deleted;
    if (deleted < batch) return total;
  }
}
