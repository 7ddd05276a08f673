import { randomUUID } from 'node:crypto';
import { KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { ConfigError } from '../../core/errors.js';
import { validateGroup } from '../../core/group.js';
import {
  DEFAULT_DEAD_LETTER_LIMIT,
  readDeadLetter,
  refuseCutReplay,
  replayHeaders,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
} from '../dead-letters.js';
import { createConsumer, openRecordStream, type KafkaDriver } from './kafka-driver.js';
import type { KafkaSettings } from './kafka-config.js';
import {
  kafkaBrokerId,
  ORIGINAL_OFFSET_HEADER,
  ORIGINAL_PARTITION_HEADER,
  ORIGINAL_TOPIC_HEADER,
  SETTLED_HEADER,
} from './kafka-names.js';
import type { KafkaPublisher } from './kafka-publisher.js';
import { bytesOf, readHeaderText, unreadHeaders, type KafkaMessage } from './kafka-record.js';
import type { KafkaTopology } from './kafka-topology.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** What the dead-letter topic holds: the letters, and the ids replayed or purged since. */
interface DeadLetterTopic {
  readonly letters: DeadLetter[];
  readonly settled: Set<string>;
}

/**
 * A group's dead-letter topic `<prefix>.<group>.dlt`. Kafka cannot delete one record, so a replay or
 * a purge appends a marker record naming the dead letter's id; listing reads the topic from its start
 * and leaves the marked letters out. A replay publishes the copy to the group's retry tier 0, which
 * only that group reads, then appends the marker.
 */
export class KafkaDeadLetters implements DeadLetters {
  /** The headers of a listed dead letter that are not text, as its record carries them (a replay stores them again). */
  readonly #unread = new WeakMap<DeadLetter, [Buffer, Buffer][]>();
  /** @internal made by the transport */
  constructor(
    /** @internal the transport's settings */
    readonly settings: KafkaSettings,
    /** @internal opens the transport's clients */
    readonly open: () => Promise<{
      readonly driver: KafkaDriver;
      readonly publisher: KafkaPublisher;
      readonly topology: KafkaTopology;
    }>,
  ) {}

  /** Reads the whole dead-letter topic (up to its end when the read starts). */
  async #read(group: string): Promise<DeadLetterTopic> {
    validateGroup(group);
    const { topology, driver } = await this.open();
    const topic = this.settings.names.deadLetterTopic(group);
    if (!(await topology.exists(topic))) {
      throw new ConfigError('group', `group '${group}' has no dead-letter topic '${topic}'`);
    }
    // A reader of its own that commits nothing: the group's members and offsets are left alone.
    const consumer = createConsumer(
      driver,
      this.settings,
      `${this.settings.names.prefix}.dlt-reader.${randomUUID()}`,
    );
    try {
      const ends = await consumer.listOffsets({ topics: [topic] });
      const remaining = new Map<number, bigint>();
      (ends.get(topic) ?? []).forEach((end, partition) => {
        if (end > 0n) remaining.set(partition, end);
      });
      const letters: DeadLetter[] = [];
      const settled = new Set<string>();
      if (remaining.size === 0) return { letters, settled };
      let failed: ((error: Error) => void) | undefined;
      let failure: Error | undefined;
      const stream = await openRecordStream(
        consumer,
        { topics: [topic], mode: 'earliest', autocommit: false, maxWaitTime: 100 },
        (_stream, error) => {
          failure ??= error;
          failed?.(error);
        },
      );
      try {
        const deadline = Date.now() + this.settings.timeoutMs;
        await new Promise<void>((resolve, reject) => {
          if (failure !== undefined) {
            reject(failure);
            return;
          }
          failed = reject;
          stream.on('data', (message: KafkaMessage) => {
            this.#collect(message, letters, settled);
            const end = remaining.get(message.partition);
            if (end !== undefined && message.offset + 1n >= end) remaining.delete(message.partition);
            if (remaining.size === 0) resolve();
          });
          const check = setInterval(() => {
            if (Date.now() > deadline) {
              clearInterval(check);
              reject(
                new Error(
                  `kafka: reading dead-letter topic '${topic}' took longer than ${this.settings.timeoutMs}ms`,
                ),
              );
            }
            if (remaining.size === 0) clearInterval(check);
          }, 50);
        });
      } finally {
        await stream.close().catch(() => undefined);
      }
      return { letters, settled };
    } finally {
      await consumer.close().catch(() => undefined);
      await sleep(0);
    }
  }

  #collect(message: KafkaMessage, letters: DeadLetter[], settled: Set<string>): void {
    const { headers, nonKey } = readHeaderText(message);
    const marker = headers[SETTLED_HEADER];
    if (marker !== undefined) {
      settled.add(marker);
      return;
    }
    const value = bytesOf(message);
    const letter = readDeadLetter(
      kafkaBrokerId(message.topic, message.partition, message.offset),
      headers,
      new Uint8Array(value.buffer, value.byteOffset, value.byteLength),
      {
        partition: headers[ORIGINAL_PARTITION_HEADER] ?? null,
        offset: headers[ORIGINAL_OFFSET_HEADER] ?? null,
        ...(nonKey === undefined ? {} : { nonKeyHeaders: nonKey }),
      },
    );
    const raw = unreadHeaders(message, { headers, nonKeyHeaders: nonKey });
    if (raw !== undefined) this.#unread.set(letter, raw);
    letters.push(letter);
  }

  async #open(group: string): Promise<DeadLetter[]> {
    const { letters, settled } = await this.#read(group);
    return letters
      .filter((letter) => !settled.has(letter.id))
      .sort((a, b) => a.deadAt.getTime() - b.deadAt.getTime() || a.id.localeCompare(b.id));
  }

  async list(query: DeadLetterQuery): Promise<readonly DeadLetter[]> {
    const limit = query.limit ?? DEFAULT_DEAD_LETTER_LIMIT;
    const letters = (await this.#open(query.group)).filter(
      (letter) => query.reason === undefined || letter.reason === query.reason,
    );
    return letters.slice(0, limit);
  }

  async #mark(group: string, id: string, as: 'replayed' | 'purged'): Promise<void> {
    await (
      await this.open()
    ).publisher.send({
      topic: this.settings.names.deadLetterTopic(group),
      key: id,
      headers: { [SETTLED_HEADER]: id, 'oncemq-dead-settled-as': as },
      body: new Uint8Array(0),
    });
  }

  async replay(group: string, ids: readonly string[]): Promise<number> {
    const wanted = new Set(ids);
    const letters = (await this.#open(group)).filter((letter) => wanted.has(letter.id));
    // Before any is replayed: a call naming a letter stored cut replays none.
    for (const letter of letters) refuseCutReplay(letter);
    const { publisher } = await this.open();
    for (const letter of letters) {
      await publisher.send({
        topic: this.settings.names.retryTopic(group, 0),
        key: letter.headers[ORDERING_KEY_HEADER] ?? letter.headers[KEY_HEADER],
        headers: { ...replayHeaders(letter), [ORIGINAL_TOPIC_HEADER]: letter.topic },
        rawHeaders: this.#unread.get(letter),
        body: letter.body,
      });
      await this.#mark(group, letter.id, 'replayed');
    }
    return letters.length;
  }

  async purge(group: string, ids: readonly string[]): Promise<number> {
    const wanted = new Set(ids);
    const letters = (await this.#open(group)).filter((letter) => wanted.has(letter.id));
    for (const letter of letters) await this.#mark(group, letter.id, 'purged');
    return letters.length;
  }
}
