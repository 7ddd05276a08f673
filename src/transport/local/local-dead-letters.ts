import { KEY_HEADER } from '../../core/envelope.js';
import {
  DEAD_LETTER_HEADERS,
  DEFAULT_DEAD_LETTER_LIMIT,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
  withoutDeadLetterHeaders,
} from '../dead-letters.js';
import { retryTopic } from './local-names.js';
import type { BrokerStore, StoredMessage } from './local-store.js';

interface DeadLetterRow {
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
}

/** A synchronous store call as a promise: a throw becomes a rejection. */
function later<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

/** Ids as the local broker numbers them: the row id, in decimal. */
function rowIds(ids: readonly string[]): number[] {
  return ids.filter((id) => /^[1-9]\d{0,15}$/.test(id)).map(Number);
}

function toDeadLetter(row: DeadLetterRow): DeadLetter {
  const headers = JSON.parse(row.headers) as Record<string, string>;
  return {
    id: String(row.id),
    group: row.consumer_group,
    topic: row.topic,
    key: headers[DEAD_LETTER_HEADERS.key] ?? headers[KEY_HEADER] ?? null,
    brokerId: row.broker_id,
    reason: row.reason,
    error: row.error,
    deliveryCount: row.reconsume_times + 1,
    deadAt: new Date(row.dead_at),
    headers,
    body: row.body,
    details: {
      uniqueId: row.unique_id,
      bornAt: new Date(row.born_at),
      replayedAt: row.replayed_at === null ? null : new Date(row.replayed_at),
      replayBrokerId: row.replay_broker_id,
    },
  };
}

/**
 * The dead-letter table: one row per dead-lettered copy. A replay re-stores the message in the
 * group's retry topic (`%RETRY%group`), so only that group receives it, and keeps the row marked
 * replayed (listed again with `includeReplayed`); a purge deletes rows.
 */
export class DeadLetterStore implements DeadLetters {
  readonly #store: BrokerStore;
  readonly #brokerId: (commitOffset: number) => string;
  readonly #ensureTopic: (topic: string) => void;

  /** @internal made by the broker */
  constructor(
    store: BrokerStore,
    brokerId: (commitOffset: number) => string,
    ensureTopic: (topic: string) => void,
  ) {
    this.#store = store;
    this.#brokerId = brokerId;
    this.#ensureTopic = ensureTopic;
  }

  /**
   * Stores the dead letter of `message` for `group`, with its broker id, oncemq's delivery count, the
   * reason, the error's text and the business key the group read (`null` when none).
   */
  add(
    group: string,
    message: StoredMessage,
    brokerId: string,
    deliveryCount: number,
    reason: string,
    error: string | null,
    key: string | null,
  ): void {
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
          // The key as the group read it (a header, the body), kept with the headers like every transport's;
          // a dead-letter header the message came with is not this letter's.
          JSON.stringify({
            ...withoutDeadLetterHeaders(message.headers),
            ...(key === null ? {} : { [DEAD_LETTER_HEADERS.key]: key }),
          }),
          message.body,
          message.bornAt,
          Math.max(0, deliveryCount - 1),
          reason,
          error,
          this.#store.now(),
        );
    });
  }

  depth(group: string): Promise<number> {
    return later(() => {
      const row = this.#store.read('counting dead letters', () =>
        this.#store
          .statement(
            'SELECT COUNT(*) AS depth FROM oncemq_dead_letters WHERE consumer_group = ? AND replayed_at IS NULL',
          )
          .get(group),
      ) as { depth: number };
      return row.depth;
    });
  }

  list(query: DeadLetterQuery & { readonly includeReplayed?: boolean }): Promise<DeadLetter[]> {
    return later(() => this.listNow(query));
  }

  /** {@link list}, synchronously. */
  listNow(query: DeadLetterQuery & { readonly includeReplayed?: boolean }): DeadLetter[] {
    const rows = this.#store.read('listing dead letters', () =>
      this.#store
        .statement(
          `SELECT * FROM oncemq_dead_letters WHERE consumer_group = ? AND (? IS NULL OR reason = ?)
             AND (? = 1 OR replayed_at IS NULL) ORDER BY id LIMIT ?`,
        )
        .all(
          query.group,
          query.reason ?? null,
          query.reason ?? null,
          query.includeReplayed === true ? 1 : 0,
          query.limit ?? DEFAULT_DEAD_LETTER_LIMIT,
        ),
    ) as DeadLetterRow[];
    return rows.map(toDeadLetter);
  }

  replay(group: string, ids: readonly string[]): Promise<number> {
    return later(() => this.#replay(group, ids));
  }

  #replay(group: string, ids: readonly string[]): number {
    const topic = retryTopic(group);
    this.#ensureTopic(topic);
    return this.#store.write('replaying dead letters', () => {
      const select = this.#store.statement(
        'SELECT * FROM oncemq_dead_letters WHERE id = ? AND consumer_group = ? AND replayed_at IS NULL',
      );
      const mark = this.#store.statement(
        'UPDATE oncemq_dead_letters SET replayed_at = ?, replay_broker_id = ? WHERE id = ?',
      );
      let count = 0;
      for (const id of rowIds(ids)) {
        const row = select.get(id, group) as DeadLetterRow | undefined;
        if (row === undefined) continue;
        const commitOffset = this.#store.appendInTransaction({
          topic,
          queueId: 0,
          uniqueId: row.unique_id,
          headers: withoutDeadLetterHeaders(JSON.parse(row.headers) as Record<string, string>),
          body: row.body,
          bornAt: row.born_at,
          reconsumeTimes: 0,
          originTopic: row.topic,
          originBrokerId: null,
        });
        mark.run(this.#store.now(), this.#brokerId(commitOffset), id);
        count++;
      }
      return count;
    });
  }

  purge(group: string, ids: readonly string[]): Promise<number> {
    return later(() =>
      this.#store.write('purging dead letters', () => {
        const remove = this.#store.statement(
          'DELETE FROM oncemq_dead_letters WHERE id = ? AND consumer_group = ?',
        );
        let count = 0;
        for (const id of rowIds(ids)) count += Number(remove.run(id, group).changes);
        return count;
      }),
    );
  }
}
