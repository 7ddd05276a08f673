import type { Envelope } from '../../core/envelope.js';
import { DELIVERY_COUNT_HEADER, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { DEAD_LETTER_HEADERS, deadLetterHeaders, fitDeadLetter } from '../dead-letters.js';
import type { DeadLetterOutcome, RetryOutcome, Settler } from '../settler.js';
import {
  ORIGINAL_OFFSET_HEADER,
  ORIGINAL_PARTITION_HEADER,
  ORIGINAL_TOPIC_HEADER,
  RETRY_DUE_HEADER,
  type KafkaNames,
} from './kafka-names.js';
import type { KafkaPublisher } from './kafka-publisher.js';
import { unreadHeaders, type KafkaMessage } from './kafka-record.js';

/** One record as it is settled: the record read, and the envelope its processing ended with. */
export interface KafkaDelivery {
  readonly message: KafkaMessage;
  readonly envelope: Envelope;
}

/** What a settler needs: the group, its names, the publisher of copies, and the retry tiers. */
export interface KafkaSettlerInit {
  readonly group: string;
  readonly names: KafkaNames;
  readonly publisher: KafkaPublisher;
  /** Most bytes of one record: a larger dead letter is stored cut. */
  readonly maxMessageBytes: number;
  /** Makes sure a member reads the retry tier of `delayMs` before a copy is published to it. */
  readonly tier: (delayMs: number) => Promise<unknown>;
}

/**
 * Settles Kafka records. Kafka has no per-record acknowledgement: a record is done once its member
 * commits past it, which it does after the settle resolved. So an `ack` needs nothing at the broker; a
 * retry is a copy published to the retry tier of its delay (`<prefix>.<group>.retry.<delayMs>`), a
 * dead letter a copy published to `<prefix>.<group>.dlt`, each confirmed before the settle resolves;
 * a failure rejects, and the member processes the record again after its backoff.
 */
export class KafkaSettler implements Settler<KafkaDelivery> {
  readonly #init: KafkaSettlerInit;

  constructor(init: KafkaSettlerInit) {
    this.#init = init;
  }

  /** Nothing to do at the broker: the member commits the record's offset once it is finished. */
  ack(): Promise<void> {
    return Promise.resolve();
  }

  /** Publishes a copy to the retry tier of the delay, due then, carrying the next delivery count. */
  async retry({ message, envelope }: KafkaDelivery, outcome: RetryOutcome): Promise<void> {
    const { names, group, publisher } = this.#init;
    const delayMs = Math.max(0, Math.round(outcome.delayMs));
    await this.#init.tier(delayMs);
    await publisher.send({
      topic: names.retryTopic(group, delayMs),
      key: recordKey(message, envelope),
      headers: {
        ...envelope.headers,
        ...origin(message, envelope),
        [DELIVERY_COUNT_HEADER]: String(outcome.nextDeliveryCount),
        [RETRY_DUE_HEADER]: String(Date.now() + delayMs),
      },
      rawHeaders: unreadHeaders(message, envelope),
      body: envelope.body,
    });
  }

  /** Publishes a copy with its reason to the group's dead-letter topic, cut when it is too large. */
  async deadLetter({ message, envelope }: KafkaDelivery, outcome: DeadLetterOutcome): Promise<void> {
    const { names, group, publisher } = this.#init;
    const reason = outcome.reason;
    const error = 'error' in outcome ? outcome.error : undefined;
    // Too large for the dead-letter topic as it is: stored cut, so that the partition can go on.
    const copy = fitDeadLetter(
      {
        headers: {
          ...deadLetterHeaders(envelope, {
            group,
            reason,
            error,
            key: outcome.key,
            deliveryCount: outcome.deliveryCount,
          }),
          ...origin(message, envelope),
        },
        body: envelope.body,
      },
      { maxBytes: this.#init.maxMessageBytes },
    );
    // The headers that are not text go along unless the copy had to be cut (they are the producer's own).
    const cut = copy.headers[DEAD_LETTER_HEADERS.bodyBytes] !== undefined;
    await publisher.send({
      topic: names.deadLetterTopic(group),
      key: recordKey(message, envelope),
      ...copy,
      rawHeaders: cut ? undefined : unreadHeaders(message, envelope),
    });
  }

  /** No outcome: rejects with the error, and the member processes the record again after its backoff. */
  // eslint-disable-next-line @typescript-eslint/require-await -- the error is the settle's rejection
  async fail(_delivery: KafkaDelivery, error: unknown): Promise<void> {
    throw error;
  }
}

/** Where a copy comes from: the original record's topic, partition and offset (kept through retries). */
function origin(message: KafkaMessage, envelope: Envelope): Record<string, string> {
  return {
    [ORIGINAL_TOPIC_HEADER]: envelope.topic,
    [ORIGINAL_PARTITION_HEADER]: envelope.headers[ORIGINAL_PARTITION_HEADER] ?? String(message.partition),
    [ORIGINAL_OFFSET_HEADER]: envelope.headers[ORIGINAL_OFFSET_HEADER] ?? String(message.offset),
  };
}

/** A copy's record key: the ordering key, else the business key, else the original's record key. */
function recordKey(message: KafkaMessage, envelope: Envelope): string | undefined {
  return (
    envelope.headers[ORDERING_KEY_HEADER] ??
    envelope.headers[KEY_HEADER] ??
    (message.key as Buffer | null | undefined)?.toString('utf8')
  );
}
