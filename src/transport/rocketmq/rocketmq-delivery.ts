import {
  createEnvelope,
  DELIVERY_COUNT_HEADER,
  ORDERING_KEY_HEADER,
  type Envelope,
} from '../../core/envelope.js';
import { errorText, TransportUnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { DeadLetterReason } from '../../core/outcome.js';
import { deadLetterHeaders, fitDeadLetter } from '../dead-letters.js';
import type { DeliveryResult, SettleableDelivery } from '../settle-batch.js';
import { MIN_INVISIBLE_MS } from './rocketmq-config.js';
import type { MessageViewLike, SimpleConsumerLike } from './rocketmq-driver.js';
import type { RocketMQPublisher } from './rocketmq-publisher.js';
import { deadLetterTopic } from './rocketmq-names.js';
import type { UnchargedRetries } from './rocketmq-uncharged-retries.js';

/** The broker's and the proxy's default `maxMessageSize`, of the body alone: 4 MiB. */
export const ROCKETMQ_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** The proxy's default `maxUserPropertySize`: the properties of one message, 16 KiB. */
export const ROCKETMQ_MAX_PROPERTY_BYTES = 16 * 1024;

/** What the deliveries of one subscription share. */
export interface DeliveryContext {
  readonly group: string;
  readonly consumer: SimpleConsumerLike;
  readonly publisher: RocketMQPublisher;
  readonly uncharged: UnchargedRetries;
  readonly visibilityMs: number;
  readonly failureBackoffMs: number;
  readonly logger: Logger;
}

/** RocketMQ counts invisibility in whole seconds at best: a delay is rounded up to the next second. */
export function invisibleMs(delayMs: number): number {
  return Math.max(MIN_INVISIBLE_MS, Math.ceil(delayMs / 1000) * 1000);
}

/** The message's user properties as headers, without oncemq's own count (RocketMQ's count is used). */
function headersOf(view: MessageViewLike): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of view.properties) if (name !== DELIVERY_COUNT_HEADER) headers[name] = value;
  return headers;
}

/**
 * One received message. Its receipt handle changes with every visibility change, so the keep-alive
 * and the settle go one after the other, never at once; it is settled at most once.
 */
export class RocketMQDelivery implements SettleableDelivery {
  readonly view: MessageViewLike;
  readonly envelope: Envelope;
  readonly #ctx: DeliveryContext;
  #settled = false;
  #chain: Promise<void> = Promise.resolve();

  constructor(ctx: DeliveryContext, view: MessageViewLike) {
    this.#ctx = ctx;
    this.view = view;
    const headers = headersOf(view);
    const attempt = view.deliveryAttempt ?? 1;
    const orderingKey = headers[ORDERING_KEY_HEADER];
    this.envelope = createEnvelope({
      brokerId: view.messageId,
      topic: view.topic,
      headers,
      body: Uint8Array.from(view.body),
      deliveryCount: Math.max(1, attempt - ctx.uncharged.count(view.messageId)),
      brokerDeliveryCount: attempt,
      ...(view.bornTimestamp === undefined ? {} : { publishedAt: view.bornTimestamp }),
      ...(orderingKey === undefined ? {} : { orderingKey }),
      keepAlive: {
        everyMs: Math.max(250, Math.floor(ctx.visibilityMs / 3)),
        extend: () =>
          this.#serial(async () => {
            if (this.#settled) throw new TransportUnavailableError('the delivery is settled');
            await ctx.consumer.changeInvisibleDuration(this.view, invisibleMs(ctx.visibilityMs));
          }),
      },
    });
  }

  #serial(step: () => Promise<void>): Promise<void> {
    const next = this.#chain.then(step);
    this.#chain = next.catch(() => undefined);
    return next;
  }

  /** Acts on the outcome at the broker. A failed settle is logged: the broker delivers the copy again. */
  settle(result: DeliveryResult): Promise<void> {
    return this.#serial(async () => {
      if (this.#settled) return;
      this.#settled = true;
      try {
        await this.#act(result);
      } catch (error) {
        this.#ctx.logger.warn('oncemq: a RocketMQ settle failed; the broker delivers the message again', {
          group: this.#ctx.group,
          messageId: this.view.messageId,
          error: errorText(error),
        });
      }
    });
  }

  /** Leaves the message to the broker: it comes again once its invisibility ends, unprocessed. */
  giveBack(): Promise<void> {
    return this.settle({ error: new Error('the subscription closed before processing it') });
  }

  async #act(result: DeliveryResult): Promise<void> {
    const { consumer, uncharged, failureBackoffMs } = this.#ctx;
    if ('error' in result) {
      await consumer.changeInvisibleDuration(this.view, invisibleMs(failureBackoffMs));
      return;
    }
    const { outcome } = result;
    if (outcome.action === 'ack') {
      await consumer.ack(this.view);
      uncharged.forget(this.view.messageId);
      return;
    }
    if (outcome.action === 'retry') {
      // The broker's own redelivery, after the delay: RocketMQ counts it; an uncharged one is remembered.
      if (outcome.nextDeliveryCount <= this.envelope.deliveryCount) uncharged.add(this.view.messageId);
      await consumer.changeInvisibleDuration(this.view, invisibleMs(outcome.delayMs));
      return;
    }
    await this.#deadLetter(outcome.reason, 'error' in outcome ? outcome.error : undefined, outcome.key);
  }

  /** Writes the dead-letter copy with its reason to `%DLQ%<group>`, confirmed, then acks the original. */
  async #deadLetter(reason: DeadLetterReason, error: unknown, key: string | null): Promise<void> {
    const { group, publisher, consumer, uncharged } = this.#ctx;
    // Properties too large to store as they are (the original's near the proxy's limit): stored without the
    // original's own. The body is the original's, which the broker took: its limit counts the body alone.
    const copy = fitDeadLetter(
      { headers: deadLetterHeaders(this.envelope, { group, reason, error, key }), body: this.envelope.body },
      {
        maxBytes: ROCKETMQ_MAX_MESSAGE_BYTES + ROCKETMQ_MAX_PROPERTY_BYTES,
        maxHeaderBytes: ROCKETMQ_MAX_PROPERTY_BYTES,
      },
    );
    await publisher.send({
      topic: deadLetterTopic(group),
      body: Buffer.from(copy.body),
      properties: copy.headers,
      keys: this.view.keys,
    });
    await consumer.ack(this.view);
    uncharged.forget(this.view.messageId);
  }
}
