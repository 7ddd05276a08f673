import { CHECK_MAX_TOPIC } from './local-names.js';
import type { BrokerStore, MessageToStore } from './local-store.js';

/** A half (prepared) message waiting for its transaction's decision. */
export interface HalfMessage {
  /** The half message's row id. */
  readonly id: number;
  /** The producer group whose check-back decides it. */
  readonly producerGroup: string;
  /** The topic it is stored in once committed. */
  readonly topic: string;
  /** The queue it is stored in once committed. */
  readonly queueId: number;
  /** The producer's unique id of the send. */
  readonly uniqueId: string;
  /** Its headers. */
  readonly headers: Readonly<Record<string, string>>;
  /** Its body. */
  readonly body: Uint8Array;
  /** When it was sent, in epoch milliseconds. */
  readonly bornAt: number;
  /** Check-backs made so far. */
  readonly checks: number;
}

/** A row of `oncemq_half_messages` as SQLite returns it. */
interface HalfMessageRow {
  readonly id: number;
  readonly producer_group: string;
  readonly topic: string;
  readonly queue_id: number;
  readonly unique_id: string;
  readonly headers: string;
  readonly body: Uint8Array;
  readonly born_at: number;
  readonly checks: number;
}

/** Half messages: stored invisible to consumers until their transaction commits. */
export class HalfMessageStore {
  readonly #store: BrokerStore;

  constructor(store: BrokerStore) {
    this.#store = store;
  }

  prepare(producerGroup: string, message: MessageToStore, nextCheckAt: number): number {
    return this.#store.write('storing a half message', () =>
      Number(
        this.#store
          .statement(
            `INSERT INTO oncemq_half_messages (producer_group, topic, queue_id, unique_id, headers, body, born_at, next_check_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(
            producerGroup,
            message.topic,
            message.queueId,
            message.uniqueId,
            JSON.stringify(message.headers),
            message.body,
            message.bornAt,
            nextCheckAt,
          ).lastInsertRowid,
      ),
    );
  }

  /**
   * Ends a half message: `commit` re-stores it in its topic (visible from then on), `rollback`
   * discards it, `aside` stores it in the check-max topic. Returns the new commit offset, if any;
   * undefined when the half message was already ended (by another process's check).
   */
  end(id: number, decision: 'commit' | 'rollback' | 'aside'): { commitOffset: number | null } | undefined {
    return this.#store.write('ending a half message', () => {
      const row = this.#store.statement('SELECT * FROM oncemq_half_messages WHERE id = ?').get(id) as
        HalfMessageRow | undefined;
      if (row === undefined) return undefined;
      this.#store.statement('DELETE FROM oncemq_half_messages WHERE id = ?').run(id);
      if (decision === 'rollback') return { commitOffset: null };
      const headers = JSON.parse(row.headers) as Record<string, string>;
      const commitOffset = this.#store.appendInTransaction({
        topic: decision === 'commit' ? row.topic : CHECK_MAX_TOPIC,
        queueId: decision === 'commit' ? row.queue_id : 0,
        uniqueId: row.unique_id,
        headers: decision === 'commit' ? headers : { ...headers, 'oncemq-real-topic': row.topic },
        body: row.body,
        bornAt: row.born_at,
      });
      return { commitOffset };
    });
  }

  /** Half messages of a producer group due for a check-back. */
  due(producerGroup: string, limit: number): HalfMessage[] {
    const rows = this.#store.read('reading half messages', () =>
      this.#store
        .statement(
          'SELECT * FROM oncemq_half_messages WHERE producer_group = ? AND next_check_at <= ? ORDER BY next_check_at, id LIMIT ?',
        )
        .all(producerGroup, this.#store.now(), limit),
    ) as HalfMessageRow[];
    return rows.map((row) => ({
      id: row.id,
      producerGroup: row.producer_group,
      topic: row.topic,
      queueId: row.queue_id,
      uniqueId: row.unique_id,
      headers: JSON.parse(row.headers) as Record<string, string>,
      body: row.body,
      bornAt: row.born_at,
      checks: row.checks,
    }));
  }

  /** Counts one check-back of a still undecided half message; returns the new check count. */
  recordCheck(id: number, nextCheckAt: number): number {
    return this.#store.write('recording a check-back', () => {
      const row = this.#store
        .statement(
          'UPDATE oncemq_half_messages SET checks = checks + 1, next_check_at = ? WHERE id = ? RETURNING checks',
        )
        .get(nextCheckAt, id) as { checks: number } | undefined;
      return row?.checks ?? 0;
    });
  }

  count(producerGroup?: string): number {
    const row = this.#store.read('counting half messages', () =>
      this.#store
        .statement('SELECT COUNT(*) AS n FROM oncemq_half_messages WHERE ? IS NULL OR producer_group = ?')
        .get(producerGroup ?? null, producerGroup ?? null),
    ) as { n: number };
    return row.n;
  }
}
