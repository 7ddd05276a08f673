import { retryTopic } from './local-names.js';
import type { BrokerStore, StoredMessage } from './local-store.js';

/**
 * Failed messages waiting for their retry delay (RocketMQ's schedule topic): each is parked with the
 * time it is due, then re-stored in its group's retry topic (`%RETRY%group`).
 */
export class RetrySchedule {
  readonly #store: BrokerStore;

  constructor(store: BrokerStore) {
    this.#store = store;
  }

  /**
   * Parks a failed message until `deliverAt`, then {@link RetrySchedule.promoteDue} re-stores it in the retry topic
   * with `deliveryCount` (stored as RocketMQ's reconsume times, one less).
   */
  add(
    group: string,
    message: StoredMessage,
    brokerId: string,
    deliverAt: number,
    deliveryCount: number,
  ): void {
    this.#store.write('scheduling a retry', () => {
      this.#store
        .statement(
          `INSERT INTO oncemq_schedule (consumer_group, topic, deliver_at, unique_id, headers, body, born_at, reconsume_times, origin_broker_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          group,
          message.originTopic ?? message.topic,
          deliverAt,
          message.uniqueId,
          JSON.stringify(message.headers),
          message.body,
          message.bornAt,
          Math.max(0, deliveryCount - 1),
          brokerId,
        );
    });
  }

  /** Moves a group's due retries into its retry topic; returns how many moved. */
  promoteDue(group: string, limit = 256): number {
    const now = this.#store.now();
    const due = this.#store.read('reading the schedule', () =>
      this.#store
        .statement('SELECT 1 FROM oncemq_schedule WHERE consumer_group = ? AND deliver_at <= ? LIMIT 1')
        .get(group, now),
    );
    if (due === undefined) return 0;
    const topic = retryTopic(group);
    return this.#store.write('promoting due retries', () => {
      const rows = this.#store
        .statement(
          'SELECT * FROM oncemq_schedule WHERE consumer_group = ? AND deliver_at <= ? ORDER BY deliver_at, id LIMIT ?',
        )
        .all(group, now, limit) as {
        id: number;
        topic: string;
        unique_id: string;
        headers: string;
        body: Uint8Array;
        born_at: number;
        reconsume_times: number;
        origin_broker_id: string;
      }[];
      const remove = this.#store.statement('DELETE FROM oncemq_schedule WHERE id = ?');
      for (const row of rows) {
        this.#store.appendInTransaction({
          topic,
          queueId: 0,
          uniqueId: row.unique_id,
          headers: JSON.parse(row.headers) as Record<string, string>,
          body: row.body,
          bornAt: row.born_at,
          reconsumeTimes: row.reconsume_times,
          originTopic: row.topic,
          originBrokerId: row.origin_broker_id,
        });
        remove.run(row.id);
      }
      return rows.length;
    });
  }

  /** Retries of a group still waiting for their delay. */
  count(group: string): number {
    const row = this.#store.read('counting the schedule', () =>
      this.#store.statement('SELECT COUNT(*) AS n FROM oncemq_schedule WHERE consumer_group = ?').get(group),
    ) as { n: number };
    return row.n;
  }
}
