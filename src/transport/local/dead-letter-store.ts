import type { BrokerStore, StoredMessage } from './broker-store.js';

/** A dead letter as listed. */
export interface DeadLetter {
  readonly id: number;
  readonly group: string;
  readonly topic: string;
  readonly brokerId: string;
  readonly uniqueId: string;
  readonly key: string | null;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
  readonly bornAt: Date;
  readonly reconsumeTimes: number;
  readonly reason: string;
  readonly error: string | null;
  readonly deadAt: Date;
  readonly replayedAt: Date | null;
  readonly replayBrokerId: string | null;
}

/** The dead-letter table: one row per dead-lettered copy, listable and replayable to its topic. */
export class DeadLetterStore {
  readonly #store: BrokerStore;

  constructor(store: BrokerStore) {
    this.#store = store;
  }

  add(group: string, message: StoredMessage, brokerId: string, reason: string, error: string | null): void {
    this.#store.write('dead-lettering', () => {
      this.#store
        .statement(
          `INSERT INTO oncemq_dead_letters (consumer_group, topic, broker_id, unique_id, headers, body, born_at, reconsume_times, reason, error, dead_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          group,
          message.originTopic ?? message.topic,
          brokerId,
          message.uniqueId,
          JSON.stringify(message.headers),
          message.body,
          message.bornAt,
          message.reconsumeTimes,
          reason,
          error,
          this.#store.now(),
        );
    });
  }

  list(query: { group?: string; includeReplayed?: boolean; limit?: number }): DeadLetter[] {
    const rows = this.#store.read('listing dead letters', () =>
      this.#store
        .statement(
          `SELECT * FROM oncemq_dead_letters WHERE (? IS NULL OR consumer_group = ?) AND (? = 1 OR replayed_at IS NULL)
         ORDER BY id LIMIT ?`,
        )
        .all(
          query.group ?? null,
          query.group ?? null,
          query.includeReplayed === true ? 1 : 0,
          query.limit ?? 100,
        ),
    ) as {
      id: number;
      consumer_group: string;
      topic: string;
      broker_id: string;
      unique_id: string;
      headers: string;
      body: Uint8Array;
      born_at: number;
      reconsume_times: number;
      reason: string;
      error: string | null;
      dead_at: number;
      replayed_at: number | null;
      replay_broker_id: string | null;
    }[];
    return rows.map((row) => {
      const headers = JSON.parse(row.headers) as Record<string, string>;
      return {
        id: row.id,
        group: row.consumer_group,
        topic: row.topic,
        brokerId: row.broker_id,
        uniqueId: row.unique_id,
        key: headers['oncemq-key'] ?? null,
        headers,
        body: row.body,
        bornAt: new Date(row.born_at),
        reconsumeTimes: row.reconsume_times,
        reason: row.reason,
        error: row.error,
        deadAt: new Date(row.dead_at),
        replayedAt: row.replayed_at === null ? null : new Date(row.replayed_at),
        replayBrokerId: row.replay_broker_id,
      };
    });
  }

  /**
   * Re-stores a dead letter in its topic (queue chosen by `queueOf`) and marks it replayed, in one
   * transaction. Returns the commit offset of the new copy, or undefined when already replayed.
   */
  replay(
    id: number,
    queueOf: (topic: string) => number,
  ): { commitOffset: number; topic: string } | undefined {
    return this.#store.write('replaying a dead letter', () => {
      const row = this.#store
        .statement('SELECT * FROM oncemq_dead_letters WHERE id = ? AND replayed_at IS NULL')
        .get(id) as
        { topic: string; unique_id: string; headers: string; body: Uint8Array; born_at: number } | undefined;
      if (row === undefined) return undefined;
      const commitOffset = this.#store.appendInTransaction({
        topic: row.topic,
        queueId: queueOf(row.topic),
        uniqueId: row.unique_id,
        headers: JSON.parse(row.headers) as Record<string, string>,
        body: row.body,
        bornAt: row.born_at,
      });
      this.#store
        .statement('UPDATE oncemq_dead_letters SET replayed_at = ?, replay_broker_id = ? WHERE id = ?')
        .run(this.#store.now(), String(commitOffset), id);
      return { commitOffset, topic: row.topic };
    });
  }

  /** Records the broker id a replay produced (the store knows offsets, the broker formats ids). */
  setReplayBrokerId(id: number, brokerId: string): void {
    this.#store.write('recording a replay', () => {
      this.#store
        .statement('UPDATE oncemq_dead_letters SET replay_broker_id = ? WHERE id = ?')
        .run(brokerId, id);
    });
  }
}
