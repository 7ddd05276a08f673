import { createEnvelope, type Envelope } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { Outcome } from '../../core/outcome.js';
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

/**
 * Does what an outcome says with one delivery of a queue: `ack` marks it done in memory (unless the
 * `consumer-ack-loss` fault keeps it for delivery again), `retry` parks a copy with the next delivery
 * count, `dead-letter` stores it with its reason and the count of its last attempt (an ordered
 * delivery retried in place has a higher count than the envelope it was pulled as) — each then done. A store that fails leaves the
 * delivery unacked and rethrows: the caller delivers it again after a backoff.
 */
export function settleLocal(
  ctx: ConsumerContext,
  group: string,
  cursor: Cursor,
  message: StoredMessage,
  envelope: Envelope,
  outcome: Outcome,
): void {
  const { store } = ctx;
  switch (outcome.action) {
    case 'ack':
      if (ctx.faults?.consumerAckLost(envelope)) {
        cursor.redeliver.push(message);
        return;
      }
      break;
    case 'retry':
      store.retries.add(
        group,
        message,
        envelope.brokerId,
        store.now() + outcome.delayMs,
        outcome.nextDeliveryCount,
      );
      break;
    case 'dead-letter':
      ctx.deadLetters.add(
        group,
        message,
        envelope.brokerId,
        outcome.deliveryCount,
        outcome.reason,
        errorText(outcome.error),
        outcome.key,
      );
      break;
  }
  cursor.unacked.delete(message.queueOffset);
}
