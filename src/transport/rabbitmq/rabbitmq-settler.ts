import type { DeliveryKeepAlive, Envelope } from '../../core/envelope.js';
import { TransportUnavailableError } from '../../core/errors.js';
import { MAX_RETRY_DELAY_MS } from '../../core/outcome.js';
import {
  DEAD_LETTER_HEADER_NAMES,
  deadLetterHeaders,
  fitDeadLetter,
  type DeadLetterCause,
} from '../dead-letters.js';
import type { DeadLetterOutcome, RetryOutcome, Settler } from '../settler.js';
import type { AmqpMessageLike, AmqpPublishOptions } from './rabbitmq-driver.js';
import { UnconfirmedPublishError, type RabbitChannel } from './rabbitmq-channel.js';
import type { RabbitSettings } from './rabbitmq-config.js';
import {
  copyOptions,
  ORIGINAL_QUEUE_HEADER,
  retryDue,
  retryHeaders,
  TOPIC_HEADER,
  toEnvelope,
} from './rabbitmq-message.js';
import { delayLevel } from './rabbitmq-names.js';
import type { RabbitTopology } from './rabbitmq-topology.js';

/** How often a long handler's lease keeper checks that its delivery's channel is still open. */
export const KEEP_ALIVE_EVERY_MS = 5_000;

/**
 * Most bytes of headers one message can carry: amqplib encodes a header table in a scratch buffer of
 * 64 KiB (a larger one throws at publish), below RabbitMQ's default `frame_max` of 128 KiB, which
 * bounds the content-header frame they travel in.
 */
export const AMQP_MAX_HEADER_BYTES = 65_536;

/** One delivery and the channel that delivered it: its tag is good on that channel only. */
export interface Delivery {
  readonly channel: RabbitChannel;
  readonly message: AmqpMessageLike;
  /** The queue it came from, when not the group's work queue (an ordered group's partition). */
  readonly queue?: string;
  /** Set once it was acked, handed back, or found stale: never settled twice. */
  settled: boolean;
}

/** A delivery with the envelope made of it: what the settler acts on. */
export interface EnvelopedDelivery extends Delivery {
  readonly envelope: Envelope;
}

/**
 * Gives `delivery` its envelope (the same object, so that `settled` stays one flag), with a keep-alive
 * that watches the delivery's channel.
 */
export function withEnvelope(delivery: Delivery): EnvelopedDelivery {
  return Object.assign(delivery, { envelope: toEnvelope(delivery.message, channelKeepAlive(delivery)) });
}

/**
 * What became of a settle: `settled` (acked, after its copy was confirmed), `stale` (its channel
 * closed: nothing sent, the broker delivers it again) or `unsettled` (the processor threw: left for
 * the subscription to hand back after a backoff).
 */
export type SettleResult = 'settled' | 'stale' | 'unsettled';

/**
 * Keeps a delivery while its handler runs: RabbitMQ holds an unacked delivery for its channel's
 * lifetime (no visibility timeout to extend), so this only tells the lease keeper when the channel
 * is gone and the delivery will come again.
 */
export function channelKeepAlive(delivery: Delivery): DeliveryKeepAlive {
  return {
    everyMs: KEEP_ALIVE_EVERY_MS,
    extend: () =>
      delivery.channel.open
        ? Promise.resolve()
        : Promise.reject(
            new TransportUnavailableError(
              'the channel of this delivery closed: RabbitMQ delivers it again, the ledger absorbs the copy',
            ),
          ),
  };
}

/**
 * Acts on outcomes at the broker, on the channel that delivered them: `ack` acks; `retry` stores a
 * copy in the delay level's retry queue carrying `nextDeliveryCount`, and acks the original once the
 * copy is confirmed; `dead-letter` stores a copy in the group's dead-letter queue with the standard
 * dead-letter headers, confirmed before the ack. A delivery whose channel closed is stale: nothing
 * is sent (its tag is dead), the broker delivers it again. Each answers a {@link SettleResult}, and
 * rejects when a copy was not confirmed (nothing acked).
 */
export class RabbitSettler implements Settler<EnvelopedDelivery, Promise<SettleResult>> {
  readonly #settings: RabbitSettings;
  readonly #topology: RabbitTopology;
  readonly #group: string;

  constructor(settings: RabbitSettings, topology: RabbitTopology, group: string) {
    this.#settings = settings;
    this.#topology = topology;
    this.#group = group;
  }

  /** Acks the delivery. */
  ack(delivery: EnvelopedDelivery): Promise<SettleResult> {
    return this.#settle(delivery, () => Promise.resolve());
  }

  /** Stores a copy in the retry queue of the outcome's delay, confirmed, then acks the delivery. */
  retry(delivery: EnvelopedDelivery, outcome: RetryOutcome): Promise<SettleResult> {
    return this.#settle(delivery, () =>
      this.#retry(delivery, delivery.envelope, outcome.delayMs, outcome.nextDeliveryCount),
    );
  }

  /** Stores a dead-letter copy with the outcome's reason, confirmed, then acks the delivery. */
  deadLetter(delivery: EnvelopedDelivery, outcome: DeadLetterOutcome): Promise<SettleResult> {
    return this.#settle(delivery, () =>
      this.#deadLetter(delivery, delivery.envelope, {
        group: this.#group,
        reason: outcome.reason,
        error: outcome.error,
        key: outcome.key,
        deliveryCount: outcome.deliveryCount,
      }),
    );
  }

  /**
   * Sends nothing: the delivery stays unacked, and the subscription hands it back to its queue after
   * a backoff (RabbitMQ has no delayed redelivery of an unacked message).
   */
  fail(): Promise<SettleResult> {
    return Promise.resolve('unsettled');
  }

  /** Stores what the outcome asks for (`store`), then acks; a stale delivery is neither. */
  async #settle(delivery: Delivery, store: () => Promise<void>): Promise<SettleResult> {
    if (delivery.settled || !delivery.channel.open) return this.#stale(delivery);
    await store();
    return this.#ack(delivery);
  }

  /**
   * A retry copy that came back before it is due (its delay is longer than the longest level) goes
   * round again without being processed. Returns false when the delivery is due.
   */
  async parkUntilDue(delivery: Delivery, now = Date.now()): Promise<boolean> {
    const due = retryDue(delivery.message);
    if (due === undefined || due <= now) return false;
    const queue = await this.#topology.retryQueue(
      this.#group,
      delayLevel(this.#settings.delayLevelsMs, due - now),
    );
    await this.#store(delivery, queue, copyOptions(delivery.message, {}));
    this.#ack(delivery);
    return true;
  }

  async #retry(delivery: Delivery, envelope: Envelope, delayMs: number, next: number): Promise<void> {
    const queue = await this.#topology.retryQueue(
      this.#group,
      delayLevel(this.#settings.delayLevelsMs, delayMs),
    );
    const { message } = delivery;
    await this.#store(
      delivery,
      queue,
      // Its due time stays within what a consumer reads as one (a longer wait is a foreign header).
      copyOptions(message, retryHeaders(envelope, next, Date.now() + Math.min(delayMs, MAX_RETRY_DELAY_MS))),
    );
  }

  async #deadLetter(delivery: Delivery, envelope: Envelope, cause: DeadLetterCause): Promise<void> {
    const queue = await this.#topology.deadQueue(this.#group);
    const { message } = delivery;
    const headers = {
      ...deadLetterHeaders(envelope, cause),
      [TOPIC_HEADER]: envelope.topic,
      [ORIGINAL_QUEUE_HEADER]: delivery.queue ?? this.#topology.names.work(this.#group),
    };
    // The raw headers go on the copy (tables, bytes), less any dead-letter header the message came with.
    const options = copyOptions(message, headers, DEAD_LETTER_HEADER_NAMES);
    // Too large to store as it is (headers over one frame, a body over max_message_size): stored cut.
    const whole = { headers: headerTexts(options.headers ?? {}), body: message.content };
    const fitted = fitDeadLetter(whole, {
      maxBytes: this.#settings.maxMessageSize,
      maxHeaderBytes: AMQP_MAX_HEADER_BYTES,
    });
    if (fitted === whole) return this.#store(delivery, queue, options);
    await this.#store(
      delivery,
      queue,
      { ...options, headers: { ...fitted.headers } },
      Buffer.from(fitted.body),
    );
  }

  /**
   * Stores a copy of the delivery in one of the group's queues, confirmed. A copy returned
   * unroutable (the queue was deleted under the transport) makes the queue be declared again next
   * time; the original stays unacked meanwhile.
   */
  async #store(
    delivery: Delivery,
    queue: string,
    options: AmqpPublishOptions & { messageId: string },
    content: Buffer = delivery.message.content,
  ): Promise<void> {
    try {
      await delivery.channel.publish('', queue, content, options);
    } catch (error) {
      if (error instanceof UnconfirmedPublishError && error.reason === 'unroutable')
        this.#topology.forget(queue);
      throw error;
    }
  }

  #ack(delivery: Delivery): SettleResult {
    if (delivery.settled || !delivery.channel.ack(delivery.message)) return this.#stale(delivery);
    delivery.settled = true;
    return 'settled';
  }

  #stale(delivery: Delivery): SettleResult {
    delivery.settled = true;
    this.#settings.logger.debug('oncemq: a delivery of a closed channel is not settled; it comes again', {
      group: this.#group,
    });
    return 'stale';
  }
}

/** AMQP header values as text, for measuring them (a table such as `x-death` as its JSON). */
function headerTexts(headers: Readonly<Record<string, unknown>>): Record<string, string> {
  const texts: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers))
    texts[name] = typeof value === 'string' ? value : JSON.stringify(value ?? null);
  return texts;
}
