import { ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { LeasedSubscription, type LeasedReceive, type LeasedWork } from '../leased-subscription.js';
import type { Subscription } from '../transport.js';
import { SqsDelivery, visibilitySeconds, type SqsDeliveryContext } from './sqs-delivery.js';
import { sqsRecordOf } from './sqs-record.js';
import type { SqsOrderedLane } from './sqs-ordered-subscription.js';

/** Most messages one `ReceiveMessage` returns. */
export const SQS_MAX_RECEIVE = 10;

/** One group queue a subscription polls, and the application's topic it holds. */
export interface SqsQueue {
  readonly url: string;
  readonly topic: string;
}

/** What a subscription is made of; the transport builds it once the queues exist. */
export interface SqsSubscriptionParts extends LeasedWork<SqsDelivery> {
  readonly ctx: SqsDeliveryContext;
  readonly client: SQSClient;
  readonly queues: readonly SqsQueue[];
  readonly longPollSeconds: number;
  readonly failureBackoffMs: number;
  /** Per-key order: deliveries go through this lane (retried in place), never to the processor directly. */
  readonly lane: SqsOrderedLane | undefined;
}

/**
 * One member of a group: pollers on each of its group queues long-poll for as many messages as there
 * are free slots (up to 10 a receive, several pollers for more), each invisible to the group's other
 * members for the subscription's visibility (kept alive while its handler runs), deleted after its
 * outcome, or made visible again after a retry's delay.
 */
export class SqsSubscription implements Subscription {
  readonly group: string;
  readonly topics: readonly string[];
  readonly #parts: SqsSubscriptionParts;
  readonly #leased: LeasedSubscription<SqsDelivery>;
  /** Called once closed (the transport forgets it). */
  onClose: () => void = () => undefined;

  /** @internal made by the transport's `subscribe()` */
  constructor(group: string, topics: readonly string[], parts: SqsSubscriptionParts) {
    this.group = group;
    this.topics = Object.freeze([...topics]);
    this.#parts = parts;
    this.#leased = new LeasedSubscription(parts, {
      group,
      maxReceive: SQS_MAX_RECEIVE,
      failureBackoffMs: parts.failureBackoffMs,
      logger: parts.ctx.logger,
      closed: () => this.onClose(),
    });
  }

  /** @internal started by the transport's `subscribe()` */
  start(): void {
    const { queues, concurrency, batchSize } = this.#parts;
    const pollers = Math.max(1, Math.ceil(Math.max(concurrency, batchSize) / SQS_MAX_RECEIVE));
    for (const queue of queues) {
      const receiving = this.#receiving(queue);
      for (let i = 0; i < pollers; i++) this.#leased.loop(receiving);
    }
  }

  /** Long-polls `queue` for as many messages as asked, invisible for the subscription's visibility. */
  #receiving(queue: SqsQueue): LeasedReceive<SqsDelivery> {
    const { ctx, client, longPollSeconds } = this.#parts;
    return {
      receive: async (want, signal) => {
        const answer = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: queue.url,
            MaxNumberOfMessages: want,
            WaitTimeSeconds: longPollSeconds,
            VisibilityTimeout: Math.max(1, visibilitySeconds(ctx.visibilityMs)),
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
          }),
          { abortSignal: signal },
        );
        return (answer.Messages ?? []).map(
          (message) => new SqsDelivery(ctx, queue.url, queue.topic, sqsRecordOf(message)),
        );
      },
      failed: 'oncemq: an SQS receive failed; receiving again',
      details: { queue: queue.url },
    };
  }

  /**
   * Stops receiving (a long poll in progress is cut), waits for every delivery in hand to reach its
   * outcome and be settled, then leaves.
   */
  close(): Promise<void> {
    return this.#leased.close();
  }
}
