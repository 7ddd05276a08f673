import {
  createEnvelope,
  DELIVERY_COUNT_HEADER,
  ORDERING_KEY_HEADER,
  type Envelope,
} from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { SettleableDelivery } from '../settle-batch.js';
import type { DeliveryResult, Settler } from '../settler.js';
import { SerialSettle } from '../serial-settle.js';
import { MIN_INVISIBLE_MS } from './rocketmq-config.js';
import type { MessageViewLike } from './rocketmq-driver.js';
import type { RocketMQSettlerContext } from './rocketmq-settler.js';

/** The broker's and the proxy's default `maxMessageSize`, of the body alone: 4 MiB. */
export const ROCKETMQ_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** The proxy's default `maxUserPropertySize`: the properties of one message, 16 KiB. */
export const ROCKETMQ_MAX_PROPERTY_BYTES = 16 * 1024;

/** What the deliveries of one subscription share: the settler's context, the visibility and the settler. */
export interface DeliveryContext extends RocketMQSettlerContext {
  readonly visibilityMs: number;
  /** Acts on each delivery's result at the broker (a `RocketMQSettler`). */
  readonly settler: Settler<RocketMQDelivery>;
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
  readonly #calls = new SerialSettle();

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
          this.#calls.keepAlive(() =>
            ctx.consumer.changeInvisibleDuration(this.view, invisibleMs(ctx.visibilityMs)),
          ),
      },
    });
  }

  /** Acts on the outcome at the broker. A failed settle is logged: the broker delivers the copy again. */
  settle(result: DeliveryResult): Promise<void> {
    return this.#calls.settle(this.#ctx.settler, this, result, (error) => {
      this.#ctx.logger.warn('oncemq: a RocketMQ settle failed; the broker delivers the message again', {
        group: this.#ctx.group,
        messageId: this.view.messageId,
        error: errorText(error),
      });
    });
  }

  /** Leaves the message to the broker: it comes again once its invisibility ends, unprocessed. */
  giveBack(): Promise<void> {
    return this.settle({ error: new Error('the subscription closed before processing it') });
  }
}
