import type { Logger } from '../../core/logger.js';
import { sendDeadLetterThenAck } from '../dead-letters.js';
import type { DeadLetterOutcome, RetryOutcome, Settler } from '../settler.js';
import type { SimpleConsumerLike } from './rocketmq-driver.js';
import {
  invisibleMs,
  ROCKETMQ_MAX_MESSAGE_BYTES,
  ROCKETMQ_MAX_PROPERTY_BYTES,
  type RocketMQDelivery,
} from './rocketmq-delivery.js';
import { deadLetterTopic } from './rocketmq-names.js';
import type { RocketMQPublisher } from './rocketmq-publisher.js';
import type { UnchargedRetries } from '../uncharged-retries.js';

/** What a subscription's settler acts through: its group's consumer, the publisher, the uncharged retries. */
export interface RocketMQSettlerContext {
  readonly group: string;
  readonly consumer: SimpleConsumerLike;
  readonly publisher: RocketMQPublisher;
  readonly uncharged: UnchargedRetries;
  readonly failureBackoffMs: number;
  readonly logger: Logger;
}

/**
 * Settles a RocketMQ delivery at the broker: an ack acks it; a retry leaves it invisible for the
 * retry's delay, so the broker's own redelivery (which RocketMQ counts) brings it back; a dead letter
 * is written to `%DLQ%<group>`, confirmed, before the original is acked; a processor that threw makes
 * it visible again after the failure backoff.
 */
export class RocketMQSettler implements Settler<RocketMQDelivery> {
  readonly #ctx: RocketMQSettlerContext;

  constructor(ctx: RocketMQSettlerContext) {
    this.#ctx = ctx;
  }

  async ack(delivery: RocketMQDelivery): Promise<void> {
    await this.#ctx.consumer.ack(delivery.view);
    this.#ctx.uncharged.forget(delivery.view.messageId);
  }

  async retry(delivery: RocketMQDelivery, outcome: RetryOutcome): Promise<void> {
    // The broker's own redelivery, after the delay: RocketMQ counts it; an uncharged one is remembered.
    if (outcome.nextDeliveryCount <= delivery.envelope.deliveryCount) {
      this.#ctx.uncharged.add(delivery.view.messageId);
    }
    await this.#ctx.consumer.changeInvisibleDuration(delivery.view, invisibleMs(outcome.delayMs));
  }

  /** Writes the dead-letter copy with its reason to `%DLQ%<group>`, confirmed, then acks the original. */
  async deadLetter(delivery: RocketMQDelivery, outcome: DeadLetterOutcome): Promise<void> {
    const { group, publisher } = this.#ctx;
    await sendDeadLetterThenAck(
      delivery.envelope,
      group,
      outcome,
      // Properties too large to store as they are (the original's near the proxy's limit): stored without the
      // original's own. The body is the original's, which the broker took: its limit counts the body alone.
      {
        maxBytes: ROCKETMQ_MAX_MESSAGE_BYTES + ROCKETMQ_MAX_PROPERTY_BYTES,
        maxHeaderBytes: ROCKETMQ_MAX_PROPERTY_BYTES,
      },
      (copy) =>
        publisher.send({
          topic: deadLetterTopic(group),
          body: Buffer.from(copy.body),
          properties: copy.headers,
          keys: delivery.view.keys,
        }),
      () => this.ack(delivery),
    );
  }

  /** The processor threw: the message becomes visible again after the failure backoff, uncounted by oncemq. */
  async fail(delivery: RocketMQDelivery): Promise<void> {
    await this.#ctx.consumer.changeInvisibleDuration(delivery.view, invisibleMs(this.#ctx.failureBackoffMs));
  }
}
