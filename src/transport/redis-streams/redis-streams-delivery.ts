import { createEnvelope, readDeliveryCount, type Envelope } from '../../core/envelope.js';
import type { DeadLetterOutcome } from '../settler.js';
import { TransportUnavailableError } from '../../core/errors.js';
import { readEntry } from './redis-streams-entry.js';
import { streamBrokerId } from './redis-streams-names.js';
import type { CommandArg } from './redis-streams-connection.js';
import type { RawEntry } from './redis-streams-replies.js';

/** One entry handed to the processor, in the connection generation it was read in. */
export interface Delivery {
  readonly stream: string;
  readonly id: string;
  /** Its broker id: the stream key and the entry id. */
  readonly slot: string;
  readonly generation: number;
  readonly envelope: Envelope;
  /** The entry's fields that are not text headers, stored again on its retry and dead-letter copies. */
  readonly unread?: readonly CommandArg[] | undefined;
}

/** How the envelope of a delivery keeps its entry (see {@link deliveryOf}). */
export interface DeliverySite {
  readonly visibilityMs: number;
  /** Stream key → topic, for topic streams (the retry stream carries the topic in the entry). */
  readonly topicOf: ReadonlyMap<string, string>;
  generation(): number;
  /** Resets the entry's idle time; false when it is no longer this member's. */
  keepAlive(stream: string, id: string): Promise<boolean>;
}

/**
 * The delivery of an entry read in the current generation, `times` being the broker's delivery count
 * from the pending list. Its envelope's `keepAlive` refreshes the entry every third of the
 * visibility; it rejects once the entry is no longer this member's, or a connection was lost since.
 */
export function deliveryOf(
  site: DeliverySite,
  stream: string,
  entry: RawEntry & { readonly fields: ReadonlyMap<string, Uint8Array> },
  times: number,
): Delivery {
  const message = readEntry(stream, entry, site.topicOf.get(stream));
  const generation = site.generation();
  const slot = streamBrokerId(stream, entry.id);
  return {
    stream,
    id: entry.id,
    slot,
    generation,
    unread: message.unread,
    envelope: createEnvelope({
      brokerId: slot,
      topic: message.topic,
      headers: message.headers,
      body: message.body,
      deliveryCount: readDeliveryCount(message.headers),
      brokerDeliveryCount: times,
      nonKeyHeaders: message.nonKey,
      ...(message.publishedAt === undefined ? {} : { publishedAt: message.publishedAt }),
      keepAlive: {
        everyMs: Math.max(1, Math.floor(site.visibilityMs / 3)),
        extend: async () => {
          const kept = generation === site.generation() && (await site.keepAlive(stream, entry.id));
          if (!kept) {
            throw new TransportUnavailableError(
              `delivery ${slot} is no longer this consumer's; another member may have it`,
            );
          }
        },
      },
    }),
  };
}

/**
 * The outcome of a delivery the broker has handed out more than `maxDeliveries` times without an
 * outcome (its consumers crashed or lost their connection each time): a dead letter with reason
 * `delivery-limit`, without running the processor again. Undefined under the limit, or with no limit (0).
 */
export function deliveryLimitOutcome(
  group: string,
  envelope: Envelope,
  maxDeliveries: number,
): DeadLetterOutcome | undefined {
  const times = envelope.brokerDeliveryCount ?? 1;
  if (maxDeliveries <= 0 || times <= maxDeliveries) return undefined;
  return {
    group,
    key: null,
    topic: envelope.topic,
    brokerId: envelope.brokerId,
    deliveryCount: envelope.deliveryCount,
    elapsedMs: 0,
    kind: 'dead',
    action: 'dead-letter',
    reason: 'delivery-limit',
    error: new Error(`handed out ${times} times without an outcome (maxDeliveries ${maxDeliveries})`),
  };
}
