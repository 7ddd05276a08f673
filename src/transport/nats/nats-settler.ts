import { DELIVERY_COUNT_HEADER } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { DeadLetterReason, Outcome } from '../../core/outcome.js';
import {
  DEAD_LETTER_HEADERS,
  deadLetterHeaders,
  fitDeadLetter,
  type DeadLetterSizeLimit,
} from '../dead-letters.js';
import type { DeadLetterOutcome, RetryOutcome, Settler } from '../settler.js';
import type { NatsSettings } from './nats-config.js';
import type { NatsDelivery } from './nats-delivery.js';
import {
  deadLetterSubject,
  RETRY_DUE_HEADER,
  RETRY_PUBLISHED_HEADER,
  RETRY_TOPIC_HEADER,
  retrySubject,
} from './nats-names.js';
import type { NatsPublisher } from './nats-publisher.js';

/** Reason of a copy dead-lettered by the `maxDeliver` backstop. */
export const MAX_DELIVERIES_REASON = 'max-deliveries';

/** What the settler of one group's deliveries needs from the open transport. */
export interface NatsSettlerParts {
  readonly group: string;
  readonly settings: NatsSettings;
  readonly publisher: NatsPublisher;
  /** How large a dead-letter copy the server stores: `max_payload`, or the dead-letter stream's `max_msg_size` if smaller. */
  readonly deadLetterLimit: () => Promise<DeadLetterSizeLimit>;
}

/**
 * How a JetStream delivery is settled: an ack; a charged retry as a new copy on the group's retry
 * subject, confirmed, then the ack; a dead letter as a confirmed copy in the group's dead-letter
 * subject, then `+TERM`; an uncharged retry or a processor that threw as a delayed nak, until the
 * server's delivery count reaches `maxDeliver` and the copy is dead-lettered instead. The delivery
 * settles once, in the session it arrived in (see {@link NatsDelivery.settle}).
 */
export class NatsSettler implements Settler<NatsDelivery> {
  readonly #parts: NatsSettlerParts;

  constructor(parts: NatsSettlerParts) {
    this.#parts = parts;
  }

  async ack(delivery: NatsDelivery): Promise<void> {
    await delivery.send('ack');
  }

  async retry(delivery: NatsDelivery, outcome: RetryOutcome): Promise<void> {
    if (outcome.nextDeliveryCount !== delivery.envelope.deliveryCount) {
      await this.#retryCopy(delivery, outcome.delayMs, outcome.nextDeliveryCount);
      return;
    }
    // Not charged: a busy key, an unreachable ledger.
    await this.#again(delivery, uncharged(outcome), outcome.key, outcome.delayMs);
  }

  async deadLetter(delivery: NatsDelivery, outcome: DeadLetterOutcome): Promise<void> {
    await this.#deadLetter(delivery, outcome.reason, outcome.error, outcome.key, outcome.deliveryCount);
  }

  async fail(delivery: NatsDelivery, error: unknown): Promise<void> {
    const why = `the processor threw: ${errorText(error)}`;
    const { settings, group } = this.#parts;
    if (delivery.msg.info.deliveryCount < settings.maxDeliver) {
      settings.logger.error(
        'oncemq: the processor threw; the NATS delivery comes back after the failure backoff',
        { group, brokerId: delivery.envelope.brokerId, error: why },
      );
    }
    await this.#again(delivery, why, null, settings.failureBackoffMs);
  }

  /** An uncharged attempt: a delayed nak, or the dead letter of a copy delivered `maxDeliver` times. */
  async #again(delivery: NatsDelivery, why: string, key: string | null, delayMs: number): Promise<void> {
    const { maxDeliver } = this.#parts.settings;
    const { deliveryCount } = delivery.msg.info;
    if (deliveryCount >= maxDeliver) {
      await this.#deadLetter(
        delivery,
        MAX_DELIVERIES_REASON,
        `delivered ${deliveryCount} times without being settled (maxDeliver ${maxDeliver}); last: ${why}`,
        key,
      );
      return;
    }
    await delivery.send('nak', delayMs);
  }

  /** A charged retry: a new copy on the group's retry subject with the new count, confirmed, then the ack. */
  async #retryCopy(delivery: NatsDelivery, delayMs: number, nextDeliveryCount: number): Promise<void> {
    const { envelope } = delivery;
    const { group, settings } = this.#parts;
    await this.#parts.publisher.send({
      subject: retrySubject(settings, group),
      body: envelope.body,
      headers: {
        ...envelope.headers,
        [DELIVERY_COUNT_HEADER]: String(nextDeliveryCount),
        [RETRY_TOPIC_HEADER]: envelope.topic,
        [RETRY_DUE_HEADER]: String(Date.now() + delayMs),
        [RETRY_PUBLISHED_HEADER]: String((envelope.publishedAt ?? new Date()).getTime()),
      },
      repeated: delivery.repeated,
      // The same id when this copy fails again after a lost ack: the window drops the second retry copy.
      msgId: `retry:${group}:${envelope.brokerId}:${nextDeliveryCount}`,
    });
    if (!delivery.stale) await delivery.send('ack');
  }

  /**
   * A copy in the group's dead-letter subject (cut to the server's limit when it is too large, see
   * `fitDeadLetter`), confirmed, then `+TERM` so the server never redelivers it.
   */
  async #deadLetter(
    delivery: NatsDelivery,
    reason: DeadLetterReason,
    error: unknown,
    key: string | null,
    deliveryCount?: number,
  ): Promise<void> {
    const { envelope } = delivery;
    const { group, settings } = this.#parts;
    // A copy too large to store as it is (a message near max_payload) is stored cut; one that cannot be
    // stored at all throws, and the original stays unacked.
    const copy = fitDeadLetter(
      {
        headers: deadLetterHeaders(envelope, { group, reason, error, key, deliveryCount }),
        body: envelope.body,
      },
      await this.#parts.deadLetterLimit(),
    );
    await this.#parts.publisher.send({
      subject: deadLetterSubject(settings, group),
      ...copy,
      // The producer's own headers with several values go along unless the copy had to be cut.
      repeated: copy.headers[DEAD_LETTER_HEADERS.bodyBytes] === undefined ? delivery.repeated : undefined,
      msgId: `dead:${group}:${envelope.brokerId}`,
    });
    if (!delivery.stale) await delivery.send('term');
  }
}

function uncharged(outcome: Outcome): string {
  if (outcome.kind === 'busy') return 'the key was busy';
  if (outcome.kind === 'retry') return `not charged: ${errorText(outcome.error)}`;
  return outcome.kind;
}
