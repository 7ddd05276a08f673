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
  /**
   * Headers stored as they are, after `headers`: those of a record from another producer that are not
   * text (bytes that are not UTF-8, a name carried twice), kept on the copies the transport stores again.
   */
  readonly rawHeaders?: readonly (readonly [Buffer, Buffer])[] | undefined;
  readonly body: Uint8Array;
}

/** Most records of one produce request. */
export const SEND_RECORDS = 500;
/**
 * Most bytes (keys, values, header names and values) of one produce request, under the broker's
 * `message.max.bytes` (1 MiB by default), which bounds each partition's record batch of a request.
 */
export const SEND_BYTES = 512 * 1024;

type Receipt = PublishReceipt & { partition: number; offset: bigint };

/** A record as the client sends it: key, value and headers as bytes. */
interface Encoded {
  readonly key: Buffer | undefined;
  readonly value: Buffer;
  readonly headers: Map<Buffer, Buffer>;
}

/** A record waiting for its topic's next produce request. */
interface Waiting {
  readonly record: KafkaRecordOut;
  readonly encoded: Encoded;
  readonly bytes: number;
  readonly resolve: (receipt: Receipt) => void;
  readonly reject: (error: unknown) => void;
}

/** Encodes a record; a header that is not text throws a ConfigError here, failing this record alone. */
function encode(record: KafkaRecordOut): { encoded: Encoded; bytes: number } {
  const key = record.key === undefined ? undefined : Buffer.from(record.key, 'utf8');
  const value = Buffer.from(record.body.buffer, record.body.byteOffset, record.body.byteLength);
  const headers = writeHeaders(record.headers);
  // Each name a Buffer of its own: a name carried twice stays two headers.
  for (const [name, value] of record.rawHeaders ?? []) headers.set(Buffer.from(name), value);
  let bytes = value.length + (key?.length ?? 0);
  for (const [name, headerValue] of headers) bytes += name.length + headerValue.length;
  return { encoded: { key, value, headers }, bytes };
}

/**
 * Stores records through the idempotent producer and resolves on the broker's acknowledgement from
 * every in-sync replica (`acks=all`). Sends to one topic go one request at a time, and the records
 * sent while a request is out go together in the next one (up to {@link SEND_RECORDS} and
 * {@link SEND_BYTES}), in the order they were sent: one request and one record batch per partition
 * for many records, as a Kafka producer's batching does, with no linger time added.
 */
export class KafkaPublisher {
  /** Records waiting, per topic with a request out (the topic is absent when none is). */
  readonly #waiting = new Map<string, Waiting[]>();

  constructor(
    readonly producer: Producer,
    readonly topology: KafkaTopology,
  ) {}

  /**
   * Stores one record; the receipt names its partition and offset. One request at a time per topic:
   * `@platformatic/kafka`'s idempotent producer numbers the batches of a partition as it sends them,
   * and two sends in flight at once to one partition were seen to come back
   * OUT_OF_ORDER_SEQUENCE_NUMBER, after which every later send to it failed the same way. A request
   * that fails fails every record in it (some partitions of it may have stored theirs: a record
   * resent by the caller is a producer retry, which the consumers' ledger absorbs).
   */
  send(record: KafkaRecordOut): Promise<Receipt> {
    return new Promise<Receipt>((resolve, reject) => {
      const waiting: Waiting = { record, ...encode(record), resolve, reject };
      const queue = this.#waiting.get(record.topic);
      if (queue !== undefined) {
        queue.push(waiting);
        return;
      }
      const fresh = [waiting];
      this.#waiting.set(record.topic, fresh);
      void this.#sendAll(record.topic, fresh);
    });
  }

  /** Sends the topic's waiting records, a request at a time, until none is left. */
  async #sendAll(topic: string, queue: Waiting[]): Promise<void> {
    try {
      // The records sent in the same turn (a map over a list) go in the first request too.
      await Promise.resolve();
      while (queue.length > 0) {
        let count = 0;
        let bytes = 0;
        for (const waiting of queue) {
          if (count > 0 && (count === SEND_RECORDS || bytes + waiting.bytes > SEND_BYTES)) break;
          count++;
          bytes += waiting.bytes;
        }
        const batch = queue.splice(0, count);
        try {
          const receipts = await this.#request(topic, batch);
          batch.forEach((waiting, i) => waiting.resolve(receipts[i] as Receipt));
        } catch (error) {
          for (const waiting of batch) waiting.reject(error);
        }
      }
    } finally {
      this.#waiting.delete(topic);
    }
  }

  /** One produce request of records to one topic; their receipts, in order. */
  async #request(topic: string, records: readonly Waiting[]): Promise<Receipt[]> {
    await this.topology.ensure(topic);
    const partitions: number[] = [];
    let result;
    try {
      const metadata = await this.producer.metadata({ topics: [topic] });
      const count = metadata.topics.get(topic)?.partitionsCount ?? 0;
      if (count < 1) throw new Error(`no partitions known for '${topic}'`);
      const messages = records.map(({ encoded: { key, value, headers } }) => {
        const message = { topic, ...(key === undefined ? {} : { key }), value, headers };
        // Java's murmur2 partitioner, so Java clients agree; chosen here to know each record's offset.
        const partition = compatibilityPartitioner(message, key) % count;
        partitions.push(partition);
        return { ...message, partition };
      });
      result = await this.producer.send({ messages, acks: -1 });
    } catch (error) {
      throw new TransportUnavailableError(`kafka: publish to '${topic}' failed`, { cause: error });
    }
    // The broker answers the first offset of each partition's batch; its records follow in order.
    const base = new Map<number, bigint>();
    for (const stored of result.offsets ?? []) {
      if (stored.topic === topic) base.set(stored.partition, stored.offset);
    }
    const next = new Map<number, bigint>();
    return records.map(({ record }, i) => {
      const partition = partitions[i] as number;
      const first = base.get(partition);
      if (first === undefined) {
        throw new TransportUnavailableError(
          `kafka: the broker confirmed no offset for '${topic}' partition ${partition}`,
        );
      }
      const offset = next.get(partition) ?? first;
      next.set(partition, offset + 1n);
      return {
        brokerId: kafkaBrokerId(topic, partition, offset),
        topic,
        messageId: record.headers[UNIQUE_ID_HEADER],
        position: { partition, offset: String(offset) },
        partition,
        offset,
      };
    });
  }

  /**
   * Publishes a message: its business key is the record key, or, when it has an ordering key, the
   * ordering key is (so that one key stays in one partition) and the business key goes in the
   * `oncemq-key` header.
   */
  publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const topic = validKafkaTopic(message.topic);
    const headers: Record<string, string> = { ...message.headers };
    headers[UNIQUE_ID_HEADER] = randomUUID();
    // The record key is the business key unless the message has an ordering key: only then does the
    // business key need a header of its own (see kafkaEnvelope, which reads it back from the record key).
    if (message.orderingKey !== undefined) {
      headers[ORDERING_KEY_HEADER] = message.orderingKey;
      if (message.key !== undefined) headers[KEY_HEADER] = message.key;
    }
    return this.send({
      topic,
      key: message.orderingKey ?? message.key,
      headers,
      body: encodeBody(message.body),
    });
  }
}
