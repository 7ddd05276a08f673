import { createEnvelope, type Envelope } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { DeadLetterOutcome, RetryOutcome, Settler } from '../settler.js';
import type { StoredMessage } from './local-store.js';
import type { ConsumerContext } from './local-consumer.js';
import type { Cursor } from './local-queue-cursors.js';

/** The envelope of a stored copy: its broker id, the topic it was first published to, its delivery count. */
export function localEnvelope(ctx: ConsumerContext, message: StoredMessage): Envelope {
  return createEnvelope({
    brokerId: ctx.brokerId(message.commitOffset),
    topic: message.originTopic ?? message.topic,
    headers: message.headers,
    body: message.body,
    deliveryCount: message.reconsumeTimes + 1,
    publishedAt: new Date(message.bornAt),
  });
}

/** One delivery of a queue: the stored copy, its envelope, and the cursor of the queue it came from. */
export interface LocalDelivery {
  readonly cursor: Cursor;
  readonly message: StoredMessage;
  readonly envelope: Envelope;
}

/**
 * Settles a delivery of the local broker, in memory: `ack` marks it done (unless the
 * `consumer-ack-loss` fault keeps it for delivery again), `retry` parks a copy with the next delivery
 * count, `dead-letter` stores it with its reason and the count of its last attempt (an ordered
 * delivery retried in place has a higher count than the envelope it was pulled as) — each then done.
 * A store that fails throws, leaving the delivery unacked. A processor that threw leaves the copy to
 * come again, after `onFail`'s backoff.
 */
export class LocalSettler implements Settler<LocalDelivery, void> {
  readonly #ctx: ConsumerContext;
  readonly #group: string;
  readonly #onFail: () => void;

  constructor(ctx: ConsumerContext, group: string, onFail: () => void) {
    this.#ctx = ctx;
    this.#group = group;
    this.#onFail = onFail;
  }

  ack({ cursor, message, envelope }: LocalDelivery): void {
    if (this.#ctx.faults?.consumerAckLost(envelope)) {
      cursor.redeliver.push(message);
      return;
    }
    cursor.unacked.delete(message.queueOffset);
  }

  retry({ cursor, message, envelope }: LocalDelivery, outcome: RetryOutcome): void {
    const { store } = this.#ctx;
    store.retries.add(
      this.#group,
      message,
      envelope.brokerId,
      store.now() + outcome.delayMs,
      outcome.nextDeliveryCount,
    );
    cursor.unacked.delete(message.queueOffset);
  }

  deadLetter({ cursor, message, envelope }: LocalDelivery, outcome: DeadLetterOutcome): void {
    this.#ctx.deadLetters.add(
      this.#group,
      message,
      envelope.brokerId,
      outcome.deliveryCount,
      outcome.reason,
      errorText(outcome.error),
      outcome.key,
    );
    cursor.unacked.delete(message.queueOffset);
  }

  /** The processor (or the store) threw, not the message's fault: nothing is acked, the copy comes again. */
  fail({ cursor, message }: LocalDelivery, error: unknown): void {
    this.#ctx.logger.error('oncemq: the processor threw; the delivery stays unacked', {
      group: this.#group,
      error: errorText(error),
    });
    cursor.redeliver.push(message);
    this.#onFail();
  }
}
