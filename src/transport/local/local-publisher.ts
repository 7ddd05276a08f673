import { randomUUID } from 'node:crypto';
import { encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import type { Logger } from '../../core/logger.js';
import { UNIQUE_ID_HEADER, type OutgoingMessage, type PublishReceipt } from '../transport.js';
import type { LocalFaultHooks } from './local-fault-hooks.js';
import { validTopic } from './local-names.js';
import type { QueueSelector } from './local-queue-selector.js';
import type { BrokerStore } from './local-store.js';

/** A message about to be stored: its topic, queue, unique id, headers and body. */
export interface PreparedMessage {
  readonly topic: string;
  readonly queueId: number;
  readonly uniqueId: string;
  readonly headers: Record<string, string>;
  readonly body: Uint8Array;
  readonly bornAt: number;
}

/** What a publisher needs from its broker. */
export interface LocalPublisherSite {
  /** Opens the broker's file (once); rejects once the broker is closed. */
  open(): Promise<BrokerStore>;
  /** The open store. */
  store(): BrokerStore;
  brokerId(commitOffset: number): string;
  queueCount(topic: string): number;
  readonly selector: QueueSelector;
  readonly sendAttempts: number;
  readonly faults: LocalFaultHooks | undefined;
  readonly logger: Logger;
}

/**
 * Stores messages in the commit log: the append is the confirm. With the `producerAckLost` fault, a
 * confirm is lost and the message stored again as a new copy (a new broker id, the same unique id).
 */
export class LocalPublisher {
  readonly #site: LocalPublisherSite;

  constructor(site: LocalPublisherSite) {
    this.#site = site;
  }

  /** The receipt of a stored copy: its producer id is the unique id, its position the queue. */
  receipt(commitOffset: number, topic: string, queue: number, uniqueId: string): PublishReceipt {
    return { brokerId: this.#site.brokerId(commitOffset), topic, messageId: uniqueId, position: { queue } };
  }

  /** Headers, body and queue of a message about to be stored. */
  prepare(message: OutgoingMessage): PreparedMessage {
    const site = this.#site;
    const topic = validTopic(message.topic);
    const uniqueId = randomUUID();
    const headers: Record<string, string> = { ...message.headers, [UNIQUE_ID_HEADER]: uniqueId };
    if (message.key !== undefined) headers[KEY_HEADER] = message.key;
    const orderingKey = message.orderingKey ?? message.headers?.[ORDERING_KEY_HEADER];
    if (orderingKey !== undefined) headers[ORDERING_KEY_HEADER] = orderingKey;
    const queueId = site.selector(topic, site.queueCount(topic), orderingKey);
    return { topic, queueId, uniqueId, headers, body: encodeBody(message.body), bornAt: site.store().now() };
  }

  /** Stores the message and resolves with the receipt of the copy stored. */
  async publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const site = this.#site;
    const store = await site.open();
    const prepared = this.prepare(message);
    const orderingKey = prepared.headers[ORDERING_KEY_HEADER];
    let queueId = prepared.queueId;
    for (let attempt = 1; ; attempt++) {
      const commitOffset = store.append({ ...prepared, queueId });
      const receipt = this.receipt(commitOffset, prepared.topic, queueId, prepared.uniqueId);
      const lost =
        attempt < site.sendAttempts &&
        site.faults?.producerAckLost({ key: message.key, uniqueId: prepared.uniqueId, attempt }) === true;
      if (!lost) return receipt;
      site.logger.debug('oncemq: publish confirm lost; sending again', { brokerId: receipt.brokerId });
      queueId = site.selector(prepared.topic, site.queueCount(prepared.topic), orderingKey);
    }
  }
}
