import { randomUUID } from 'node:crypto';
import { compatibilityPartitioner, type Producer } from '@platformatic/kafka';
import { encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { TransportUnavailableError } from '../../core/errors.js';
import { UNIQUE_ID_HEADER, type OutgoingMessage, type PublishReceipt } from '../transport.js';
import { kafkaBrokerId, validKafkaTopic } from './kafka-names.js';
import { writeHeaders } from './kafka-record.js';
import type { KafkaTopology } from './kafka-topology.js';

/** One record to store: where, under which record key, with which headers and body. */
export interface KafkaRecordOut {
  readonly topic: string;
  /** The record key: it picks the partition (Java's murmur2 partitioner, so Java clients agree). */
  readonly key: string | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
}

/**
 * Stores records through the idempotent producer and resolves on the broker's acknowledgement from
 * every in-sync replica (`acks=all`).
 */
export class KafkaPublisher {
  /** The last send to each topic: sends to one topic go one after another (see {@link send}). */
  readonly #lastSend = new Map<string, Promise<unknown>>();

  constructor(
    readonly producer: Producer,
    readonly topology: KafkaTopology,
  ) {}

  /**
   * Stores one record; the receipt names its partition and offset. Sends to one topic go one after
   * another: `@platformatic/kafka`'s idempotent producer numbers the batches of a partition as it
   * sends them, and two sends in flight at once to one partition were seen to come back
   * OUT_OF_ORDER_SEQUENCE_NUMBER, after which every later send to it failed the same way.
   */
  send(record: KafkaRecordOut): Promise<PublishReceipt & { partition: number; offset: bigint }> {
    const previous = this.#lastSend.get(record.topic) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(() => this.#send(record));
    this.#lastSend.set(record.topic, next);
    void next
      .finally(() => {
        if (this.#lastSend.get(record.topic) === next) this.#lastSend.delete(record.topic);
      })
      .catch(() => undefined);
    return next;
  }

  async #send(record: KafkaRecordOut): Promise<PublishReceipt & { partition: number; offset: bigint }> {
    await this.topology.ensure(record.topic);
    let result;
    try {
      result = await this.producer.send({
        messages: [
          {
            topic: record.topic,
            ...(record.key === undefined ? {} : { key: Buffer.from(record.key, 'utf8') }),
            value: Buffer.from(record.body.buffer, record.body.byteOffset, record.body.byteLength),
            headers: writeHeaders(record.headers),
          },
        ],
        acks: -1,
        partitioner: compatibilityPartitioner,
      });
    } catch (error) {
      throw new TransportUnavailableError(`kafka: publish to '${record.topic}' failed`, { cause: error });
    }
    const stored = result.offsets?.find((offset) => offset.topic === record.topic);
    if (stored === undefined) {
      throw new TransportUnavailableError(`kafka: the broker confirmed no offset for '${record.topic}'`);
    }
    return {
      brokerId: kafkaBrokerId(record.topic, stored.partition, stored.offset),
      topic: record.topic,
      messageId: record.headers[UNIQUE_ID_HEADER],
      position: { partition: stored.partition, offset: String(stored.offset) },
      partition: stored.partition,
      offset: stored.offset,
    };
  }

  /**
   * Publishes a message: its business key is the record key (and the `oncemq-key` header), or its
   * ordering key when it has one, so that one key stays in one partition.
   */
  publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const topic = validKafkaTopic(message.topic);
    const headers: Record<string, string> = { ...message.headers };
    headers[UNIQUE_ID_HEADER] = randomUUID();
    if (message.key !== undefined) headers[KEY_HEADER] = message.key;
    if (message.orderingKey !== undefined) headers[ORDERING_KEY_HEADER] = message.orderingKey;
    return this.send({
      topic,
      key: message.orderingKey ?? message.key,
      headers,
      body: encodeBody(message.body),
    });
  }
}
