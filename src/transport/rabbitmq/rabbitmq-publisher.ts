import { randomUUID } from 'node:crypto';
import { encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import { partitionOf } from '../partitions.js';
import { UNIQUE_ID_HEADER, type OutgoingMessage, type PublishReceipt } from '../transport.js';
import { UnconfirmedPublishError, type RabbitChannel } from './rabbitmq-channel.js';
import type { RabbitSettings } from './rabbitmq-config.js';
import type { RabbitConnection } from './rabbitmq-connection.js';
import { newBrokerId, TOPIC_HEADER } from './rabbitmq-message.js';
import { RABBIT_SLOTS, slotKey, validTopic } from './rabbitmq-names.js';
import type { RabbitTopology } from './rabbitmq-topology.js';

/** Wait before the n-th new copy of an unconfirmed publish: n times this. */
const PUBLISH_RETRY_MS = 50;

/** What a publisher needs from its transport. */
export interface RabbitPublisherSite {
  readonly settings: RabbitSettings;
  readonly connection: RabbitConnection;
  readonly topology: RabbitTopology;
  /** Connects; throws once the transport is closed. */
  init(): Promise<void>;
  /** Throws once the transport is closed. */
  refuseClosed(): void;
  /** Whether the transport is closed (or closing). */
  closed(): boolean;
}

/**
 * Publishes to the exchange on one shared channel in confirm mode, opened again after it closed. A
 * copy whose confirm is lost (the channel closed, the broker nacked) is sent again as a new copy (a
 * new broker id, the same key and unique id), at most `publishAttempts` times; an unroutable message
 * (no queue or log bound to the topic) is refused at once.
 */
export class RabbitPublisher {
  readonly #site: RabbitPublisherSite;
  #channel: Promise<RabbitChannel> | undefined;
  /** The publishing channel while it is open (what {@link #channel} resolved to). */
  #open: RabbitChannel | undefined;
  /** Topics whose topology is in place: their publishes go straight to the channel. */
  readonly #readyTopics = new Set<string>();

  constructor(site: RabbitPublisherSite) {
    this.#site = site;
  }

  /** Publishes with the topic as routing key; resolves once the broker confirmed the stored copy. */
  async publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const site = this.#site;
    site.refuseClosed();
    const topic = validTopic(message.topic);
    // The connection and the topic's topology are settled once; later publishes skip the awaits.
    if (!this.#readyTopics.has(topic)) {
      await site.init();
      await site.topology.topic(topic);
      this.#readyTopics.add(topic);
    }
    const uniqueId = randomUUID();
    // Object.assign, not a spread: V8 copies an object of hyphenated keys by spread some 30 times slower.
    const headers: Record<string, string> = Object.assign({}, message.headers);
    headers[UNIQUE_ID_HEADER] = uniqueId;
    headers[TOPIC_HEADER] = topic;
    if (message.key !== undefined) headers[KEY_HEADER] = message.key;
    const orderingKey = message.orderingKey ?? message.headers?.[ORDERING_KEY_HEADER];
    if (orderingKey !== undefined) headers[ORDERING_KEY_HEADER] = orderingKey;
    // The slot an ordered group's partition takes it from: one ordering key, one slot.
    const slot = slotKey(topic, partitionOf(orderingKey ?? uniqueId, RABBIT_SLOTS));
    const bytes = encodeBody(message.body);
    // A view of the caller's bytes, not a copy: amqplib copies a small body into its frame and has a
    // large one written before the confirm, so the bytes are read before the publish settles.
    const body = Buffer.isBuffer(bytes)
      ? bytes
      : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const timestamp = Math.floor(Date.now() / 1000);
    const { exchange, publishAttempts, logger } = site.settings;
    for (let attempt = 1; ; attempt++) {
      const brokerId = newBrokerId();
      try {
        const channel = this.#open ?? (await this.#openChannel());
        await channel.publish(exchange, topic, body, {
          messageId: brokerId,
          headers,
          timestamp,
          BCC: slot,
        });
        return { brokerId, topic, messageId: uniqueId, position: { exchange } };
      } catch (error) {
        const retriable = !(error instanceof UnconfirmedPublishError) || error.reason !== 'unroutable';
        if (!retriable || attempt >= publishAttempts || site.closed()) throw error;
        logger.warn('oncemq: publish not confirmed; sending a new copy', {
          topic,
          attempt,
          error: errorText(error),
        });
        // Not at once: what refused the copy (a queue being deleted, a full queue that rejects
        // publishes) refuses one sent in the same millisecond as well.
        await new Promise((resolve) => setTimeout(resolve, PUBLISH_RETRY_MS * attempt));
      }
    }
  }

  /** The shared publishing channel, opened again after it closed. */
  #openChannel(): Promise<RabbitChannel> {
    const { connection, settings } = this.#site;
    this.#channel ??= connection.channel('publish', settings.publishTimeoutMs).then(
      (channel) => {
        channel.onClose(() => {
          this.#channel = undefined;
          if (this.#open === channel) this.#open = undefined;
        });
        if (channel.open) this.#open = channel;
        return channel;
      },
      (error: unknown) => {
        this.#channel = undefined;
        throw error;
      },
    );
    return this.#channel;
  }

  /** Closes the publishing channel, if one was opened. */
  async close(): Promise<void> {
    const channel = await this.#channel?.catch(() => undefined);
    await channel?.close();
  }
}
