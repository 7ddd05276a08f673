import type { BrokerStore, StoredMessage } from './local-store.js';
import { queueName, type QueueRef } from './local-queue-allocation.js';

/** Position of a member in one queue. Offsets below the committable one are done. */
export interface Cursor {
  readonly ref: QueueRef;
  readonly name: string;
  /** Next queue offset to pull. */
  next: number;
  /** Pulled and not yet acked. */
  readonly unacked: Set<number>;
  /** Pulled copies whose ack was lost: delivered again, same broker id. */
  redeliver: StoredMessage[];
  committed: number;
}

/** The offset a queue can be committed at: the lowest unacked one, else the next to pull. */
export const committable = (cursor: Cursor): number =>
  cursor.unacked.size === 0 ? cursor.next : Math.min(...cursor.unacked);

/**
 * The queues one member holds, with its in-memory acks: what it pulls next, what it may commit, and
 * what it hands over when a rebalance takes a queue away.
 */
export class QueueCursors {
  readonly #cursors = new Map<string, Cursor>();

  constructor(
    private readonly store: BrokerStore,
    private readonly group: string,
  ) {}

  /** The cursors held now (a copy: the holding may change while a caller iterates). */
  list(): Cursor[] {
    return [...this.#cursors.values()];
  }

  /** Whether `cursor` is still held (a rebalance or a crash may have dropped it). */
  holds(cursor: Cursor): boolean {
    return this.#cursors.get(cursor.name) === cursor;
  }

  refs(): QueueRef[] {
    return this.list().map((cursor) => cursor.ref);
  }

  /** Forgets every queue without committing (a crash). */
  clear(): void {
    this.#cursors.clear();
  }

  /** Persists the committable offset of every held queue. */
  commit(): void {
    const entries = [];
    // written even when unchanged: a former owner handing a queue over may have moved it back
    for (const cursor of this.#cursors.values())
      entries.push({ ...cursor.ref, offset: committable(cursor), cursor });
    this.store.commitOffsets(this.group, entries);
    for (const entry of entries) entry.cursor.committed = entry.offset;
  }

  /**
   * Holds exactly the queues `mine`: commits and drops the others (handing them over), and starts the
   * new ones at their committed offset (or where `consumeFrom` says for a queue never committed).
   */
  reassign(mine: readonly QueueRef[], consumeFrom: 'first' | 'last'): void {
    const names = new Set(mine.map(queueName));
    const handOver = [];
    for (const [name, cursor] of this.#cursors) {
      if (names.has(name)) continue;
      handOver.push({ ...cursor.ref, offset: committable(cursor) });
      this.#cursors.delete(name);
    }
    this.store.commitOffsets(this.group, handOver);
    for (const ref of mine) {
      const name = queueName(ref);
      if (this.#cursors.has(name)) continue;
      const offset =
        this.store.readOffset(this.group, ref.topic, ref.queueId) ??
        (consumeFrom === 'first' ? 0 : this.store.maxOffset(ref.topic, ref.queueId));
      this.#cursors.set(name, {
        ref,
        name,
        next: offset,
        unacked: new Set(),
        redeliver: [],
        committed: offset,
      });
    }
  }

  /** The next batch of a queue: copies to deliver again first, else up to `limit` new ones. */
  take(cursor: Cursor, limit: number): StoredMessage[] {
    if (cursor.redeliver.length > 0) {
      const batch = cursor.redeliver;
      cursor.redeliver = [];
      return batch;
    }
    const batch = this.store.pull(cursor.ref.topic, cursor.ref.queueId, cursor.next, limit);
    for (const message of batch) cursor.unacked.add(message.queueOffset);
    const last = batch.at(-1);
    if (last !== undefined) cursor.next = last.queueOffset + 1;
    return batch;
  }
}
