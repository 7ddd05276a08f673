import { ConfigError, TransportUnavailableError } from '../../core/errors.js';
import { BROKER_MIGRATIONS } from './local-schema.js';
import { HalfMessageStore } from './local-half-message-store.js';
import { RetrySchedule } from './local-retry-schedule.js';

/** The part of a better-sqlite3 statement the broker calls. */
export interface BrokerStatementLike {
  run(...params: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** The part of a better-sqlite3 `Database` the broker calls. */
export interface BrokerDatabaseLike {
  prepare(sql: string): BrokerStatementLike;
  exec(sql: string): unknown;
  readonly inTransaction: boolean;
  close(): unknown;
}

/** One stored copy in the commit log. */
export interface StoredMessage {
  /** Commit-log offset: unique per stored copy. */
  readonly commitOffset: number;
  /** The topic it is stored in (a retry copy: the group's retry topic). */
  readonly topic: string;
  /** The queue of the topic it is stored in. */
  readonly queueId: number;
  /** Its position in that queue. */
  readonly queueOffset: number;
  /** The producer's unique id of the send, kept by its resends and retries. */
  readonly uniqueId: string;
  /** Its headers. */
  readonly headers: Readonly<Record<string, string>>;
  /** Its body. */
  readonly body: Uint8Array;
  /** First publish of the message (kept by retries). */
  readonly bornAt: number;
  /** When this copy was stored, in epoch milliseconds. */
  readonly storedAt: number;
  /** Delayed retries so far. */
  readonly reconsumeTimes: number;
  /** For a retry copy: the topic the message was first published to. */
  readonly originTopic: string | null;
  /** For a retry copy: the broker id of the copy whose retry it is. */
  readonly originBrokerId: string | null;
}

/** A message as the producer hands it to the store. */
export interface MessageToStore {
  readonly topic: string;
  readonly queueId: number;
  readonly uniqueId: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
  readonly bornAt: number;
  readonly reconsumeTimes?: number;
  readonly originTopic?: string | null;
  readonly originBrokerId?: string | null;
}

interface MessageRow {
  commit_offset: number;
  topic: string;
  queue_id: number;
  queue_offset: number;
  unique_id: string;
  headers: string;
  body: Uint8Array;
  born_at: number;
  stored_at: number;
  reconsume_times: number;
  origin_topic: string | null;
  origin_broker_id: string | null;
}

const toMessage = (row: MessageRow): StoredMessage => ({
  commitOffset: row.commit_offset,
  topic: row.topic,
  queueId: row.queue_id,
  queueOffset: row.queue_offset,
  uniqueId: row.unique_id,
  headers: JSON.parse(row.headers) as Record<string, string>,
  body: row.body,
  bornAt: row.born_at,
  storedAt: row.stored_at,
  reconsumeTimes: row.reconsume_times,
  originTopic: row.origin_topic,
  originBrokerId: row.origin_broker_id,
});

/**
 * Every SQL statement of the local broker, synchronous (better-sqlite3). Writes run in
 * `BEGIN IMMEDIATE` transactions so processes sharing the file serialize on SQLite's write lock.
 */
export class BrokerStore {
  readonly #db: BrokerDatabaseLike;
  readonly #cache = new Map<string, BrokerStatementLike>();
  readonly #clock: () => number;

  /** Half messages of transactional sends. */
  readonly halfMessages: HalfMessageStore;
  /** Failed messages waiting for their retry delay. */
  readonly retries: RetrySchedule;

  constructor(db: BrokerDatabaseLike, clock: () => number) {
    this.#db = db;
    this.#clock = clock;
    this.halfMessages = new HalfMessageStore(this);
    this.retries = new RetrySchedule(this);
  }

  now(): number {
    return this.#clock();
  }

  /** A prepared statement, cached. */
  statement(sql: string): BrokerStatementLike {
    let statement = this.#cache.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#cache.set(sql, statement);
    }
    return statement;
  }

  /** Runs `fn` in one write transaction; driver failures become TransportUnavailableError. */
  write<T>(what: string, fn: () => T): T {
    return this.#guard(what, () => {
      this.#db.exec('BEGIN IMMEDIATE');
      try {
        const value = fn();
        this.#db.exec('COMMIT');
        return value;
      } catch (error) {
        if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
        throw error;
      }
    });
  }

  read<T>(what: string, fn: () => T): T {
    return this.#guard(what, fn);
  }

  #guard<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      if (error instanceof TransportUnavailableError) throw error;
      throw new TransportUnavailableError(`local broker failed ${what}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  migrate(): void {
    this.write('migrating', () => {
      this.#db.exec(
        'CREATE TABLE IF NOT EXISTS oncemq_broker_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
      );
      const row = this.#db.prepare('SELECT MAX(version) AS version FROM oncemq_broker_schema').get() as {
        version: number | null;
      };
      for (let version = (row.version ?? 0) + 1; version <= BROKER_MIGRATIONS.length; version++) {
        this.#db.exec(BROKER_MIGRATIONS[version - 1] ?? '');
        this.#db
          .prepare('INSERT INTO oncemq_broker_schema (version, applied_at) VALUES (?, ?)')
          .run(version, this.now());
      }
    });
  }

  /**
   * Checks, without changing anything, that the file holds the broker's tables at the current
   * version; throws a ConfigError naming the file otherwise.
   */
  checkSchema(path: string): void {
    const version = this.read('reading the schema version', () => {
      const table = this.#db
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'oncemq_broker_schema'")
        .get();
      if (table === undefined) return undefined;
      const row = this.#db.prepare('SELECT MAX(version) AS version FROM oncemq_broker_schema').get() as {
        version: number | null;
      };
      return row.version ?? 0;
    });
    if (version === undefined) {
      throw new ConfigError('path', `${path} holds no local broker (no oncemq_broker_schema table)`);
    }
    if (version !== BROKER_MIGRATIONS.length) {
      throw new ConfigError(
        'path',
        `the local broker at ${path} is at schema version ${version}, this oncemq reads version ${BROKER_MIGRATIONS.length}; open it once with a producer or consumer of this version to upgrade it`,
      );
    }
  }

  /** Queue count of a topic, creating it with `queues` queues when new. */
  ensureTopic(topic: string, queues: number): number {
    const existing = this.read('reading a topic', () => this.#queueCount(topic));
    if (existing !== undefined) return existing;
    return this.write('creating a topic', () => {
      const again = this.#queueCount(topic);
      if (again !== undefined) return again;
      this.statement('INSERT INTO oncemq_topics (topic, queues, created_at) VALUES (?, ?, ?)').run(
        topic,
        queues,
        this.now(),
      );
      const insert = this.statement(
        'INSERT INTO oncemq_queues (topic, queue_id, next_offset) VALUES (?, ?, 0)',
      );
      for (let queue = 0; queue < queues; queue++) insert.run(topic, queue);
      return queues;
    });
  }

  #queueCount(topic: string): number | undefined {
    const row = this.statement('SELECT queues FROM oncemq_topics WHERE topic = ?').get(topic) as
      { queues: number } | undefined;
    return row?.queues;
  }

  /** Appends to the commit log inside the caller's write transaction; returns the commit offset. */
  appendInTransaction(message: MessageToStore): number {
    const slot = this.statement(
      'UPDATE oncemq_queues SET next_offset = next_offset + 1 WHERE topic = ? AND queue_id = ? RETURNING next_offset - 1 AS queue_offset',
    ).get(message.topic, message.queueId) as { queue_offset: number } | undefined;
    if (slot === undefined) throw new Error(`queue ${message.topic}#${message.queueId} does not exist`);
    const inserted = this.statement(
      `INSERT INTO oncemq_messages (topic, queue_id, queue_offset, unique_id, headers, body, born_at, stored_at,
         reconsume_times, origin_topic, origin_broker_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      message.topic,
      message.queueId,
      slot.queue_offset,
      message.uniqueId,
      JSON.stringify(message.headers),
      message.body,
      message.bornAt,
      this.now(),
      message.reconsumeTimes ?? 0,
      message.originTopic ?? null,
      message.originBrokerId ?? null,
    );
    return Number(inserted.lastInsertRowid);
  }

  append(message: MessageToStore): number {
    return this.write('storing a message', () => this.appendInTransaction(message));
  }

  /** Messages of one queue from `fromOffset` on, in queue order. */
  pull(topic: string, queueId: number, fromOffset: number, limit: number): StoredMessage[] {
    const rows = this.read('pulling', () =>
      this.statement(
        'SELECT * FROM oncemq_messages WHERE topic = ? AND queue_id = ? AND queue_offset >= ? ORDER BY queue_offset LIMIT ?',
      ).all(topic, queueId, fromOffset, limit),
    ) as MessageRow[];
    return rows.map(toMessage);
  }

  /** Next offset to be written in a queue (its length). */
  maxOffset(topic: string, queueId: number): number {
    const row = this.read('reading a queue', () =>
      this.statement('SELECT next_offset FROM oncemq_queues WHERE topic = ? AND queue_id = ?').get(
        topic,
        queueId,
      ),
    ) as { next_offset: number } | undefined;
    return row?.next_offset ?? 0;
  }

  /** Messages of `topic` by commit order (for inspection and tests). */
  messages(topic: string): StoredMessage[] {
    const rows = this.read('listing messages', () =>
      this.statement('SELECT * FROM oncemq_messages WHERE topic = ? ORDER BY commit_offset').all(topic),
    ) as MessageRow[];
    return rows.map(toMessage);
  }

  readOffset(group: string, topic: string, queueId: number): number | undefined {
    const row = this.read('reading an offset', () =>
      this.statement(
        'SELECT next_offset FROM oncemq_offsets WHERE consumer_group = ? AND topic = ? AND queue_id = ?',
      ).get(group, topic, queueId),
    ) as { next_offset: number } | undefined;
    return row?.next_offset;
  }

  commitOffsets(group: string, entries: readonly { topic: string; queueId: number; offset: number }[]): void {
    if (entries.length === 0) return;
    this.write('committing offsets', () => {
      const upsert = this.statement(
        `INSERT INTO oncemq_offsets (consumer_group, topic, queue_id, next_offset, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (consumer_group, topic, queue_id) DO UPDATE SET next_offset = excluded.next_offset, updated_at = excluded.updated_at`,
      );
      const now = this.now();
      for (const entry of entries) upsert.run(group, entry.topic, entry.queueId, entry.offset, now);
    });
  }

  /**
   * Gives `group` a position on each of `topic`'s `queues` where it has none yet: the first offset
   * (`earliest`) or the queue's next one (`now`), in one write, so that no publish falls between the
   * read of a queue's end and the offset. A queue the group has an offset on keeps it.
   */
  startGroup(group: string, topic: string, queues: number, from: 'now' | 'earliest'): void {
    this.write('starting a group', () => {
      const insert = this.statement(
        `INSERT INTO oncemq_offsets (consumer_group, topic, queue_id, next_offset, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (consumer_group, topic, queue_id) DO NOTHING`,
      );
      const now = this.now();
      for (let queueId = 0; queueId < queues; queueId++) {
        const offset = from === 'now' ? this.maxOffset(topic, queueId) : 0;
        insert.run(group, topic, queueId, offset, now);
      }
    });
  }

  heartbeat(group: string, memberId: string): void {
    this.write('heart-beating', () => {
      const now = this.now();
      this.statement(
        `INSERT INTO oncemq_members (consumer_group, member_id, heartbeat_at, joined_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (consumer_group, member_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`,
      ).run(group, memberId, now, now);
    });
  }

  leave(group: string, memberId: string): void {
    this.write('leaving a group', () => {
      this.statement('DELETE FROM oncemq_members WHERE consumer_group = ? AND member_id = ?').run(
        group,
        memberId,
      );
    });
  }

  /** Live members of a group, sorted; members silent for `sessionTimeoutMs` are removed first. */
  liveMembers(group: string, sessionTimeoutMs: number): string[] {
    const cutoff = this.now() - sessionTimeoutMs;
    const stale = this.read('reading members', () =>
      this.statement(
        'SELECT 1 FROM oncemq_members WHERE consumer_group = ? AND heartbeat_at < ? LIMIT 1',
      ).get(group, cutoff),
    );
    if (stale !== undefined) {
      this.write('expiring members', () => {
        this.statement('DELETE FROM oncemq_members WHERE consumer_group = ? AND heartbeat_at < ?').run(
          group,
          cutoff,
        );
      });
    }
    const rows = this.read('reading members', () =>
      this.statement('SELECT member_id FROM oncemq_members WHERE consumer_group = ? ORDER BY member_id').all(
        group,
      ),
    ) as { member_id: string }[];
    return rows.map((row) => row.member_id);
  }

  close(): void {
    this.#cache.clear();
    this.#db.close();
  }
}
