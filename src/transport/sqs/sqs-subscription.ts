import { ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorText } from '../../core/errors.js';
import type { Outcome } from '../../core/outcome.js';
import { DeliverySlots } from '../delivery-slots.js';
import { processAndSettleBatch } from '../settle-batch.js';
import type { Processor, Subscription } from '../transport.js';
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
export interface SqsSubscriptionParts {
  readonly ctx: SqsDeliveryContext;
  readonly client: SQSClient;
  readonly queues: readonly SqsQueue[];
  readonly processor: Processor;
  readonly concurrency: number;
  /** Deliveries handed to `processBatch` at once; 1 hands them one by one. */
  readonly batchSize: number;
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
  readonly #slots: DeliverySlots;
  readonly #inflight = new Set<Promise<void>>();
  readonly #abort = new AbortController();
  #loops: Promise<void>[] = [];
  #closing = false;
  #closed: Promise<void> | undefined;
  /** Called once closed (the transport forgets it). */
  onClose: () => void = () => undefined;

  /** @internal made by the transport's `subscribe()` */
  constructor(group: string, topics: readonly string[], parts: SqsSubscriptionParts) {
    this.group = group;
    this.topics = Object.freeze([...topics]);
    this.#parts = parts;
    this.#slots = new DeliverySlots(parts.concurrency);
  }

  /** @internal started by the transport's `subscribe()` */
  start(): void {
    const { queues, concurrency, batchSize } = this.#parts;
    const pollers = Math.max(1, Math.ceil(Math.max(concurrency, batchSize) / SQS_MAX_RECEIVE));
    for (const queue of queues) {
      for (let i = 0; i < pollers; i++) this.#loops.push(this.#receiveLoop(queue));
    }
  }

  #isClosing(): boolean {
    return this.#closing;
  }

  async #receiveLoop(queue: SqsQueue): Promise<void> {
    const { ctx, client, batchSize, concurrency, longPollSeconds } = this.#parts;
    while (!this.#closing) {
      const want = await this.#slots.acquire(
        Math.min(SQS_MAX_RECEIVE, batchSize > 1 ? batchSize : concurrency),
      );
      if (want === 0) break;
      let got = 0;
      try {
        const answer = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: queue.url,
            MaxNumberOfMessages: want,
            WaitTimeSeconds: longPollSeconds,
            VisibilityTimeout: Math.max(1, visibilitySeconds(ctx.visibilityMs)),
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
          }),
          { abortSignal: this.#abort.signal },
        );
        const messages = answer.Messages ?? [];
        got = messages.length;
        this.#dispatch(
          messages.map((message) => new SqsDelivery(ctx, queue.url, queue.topic, sqsRecordOf(message))),
        );
      } catch (error) {
        if (this.#isClosing()) break;
        ctx.logger.warn('oncemq: an SQS receive failed; receiving again', {
          group: this.group,
          queue: queue.url,
          error: errorText(error),
        });
        await sleep(this.#parts.failureBackoffMs);
      } finally {
        this.#slots.release(Math.max(0, want - got));
      }
    }
  }

  #dispatch(deliveries: readonly SqsDelivery[]): void {
    const release = (count: number) => () => this.#slots.release(count);
    const work: SqsDelivery[] = [];
    for (const delivery of deliveries) {
      if (this.#closing) this.#track(delivery.giveBack(), release(1));
      else work.push(delivery);
    }
    if (work.length === 0) return;
    const { processor, batchSize } = this.#parts;
    if (batchSize > 1 && processor.processBatch !== undefined) {
      const processBatch = processor.processBatch.bind(processor);
      this.#track(processAndSettleBatch(processBatch, work), release(work.length));
      return;
    }
    for (const delivery of work) this.#track(this.#processOne(delivery), release(1));
  }

  #track(work: Promise<void>, done: () => void): void {
    const tracked = work.finally(() => {
      this.#inflight.delete(tracked);
      done();
    });
    this.#inflight.add(tracked);
  }

  async #processOne(delivery: SqsDelivery): Promise<void> {
    const { lane, processor } = this.#parts;
    if (lane !== undefined) {
      await lane.handle(delivery);
      return;
    }
    let outcome: Outcome;
    try {
      outcome = await processor.process(delivery.envelope);
    } catch (error) {
      await delivery.settle({ error });
      return;
    }
    await delivery.settle({ outcome });
  }

  /**
   * Stops receiving (a long poll in progress is cut), waits for every delivery in hand to reach its
   * outcome and be settled, then leaves.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    this.#slots.close();
    this.#abort.abort();
    this.#parts.lane?.close();
    await Promise.all(this.#loops);
    while (this.#inflight.size > 0) await Promise.all([...this.#inflight]);
    await this.#parts.lane?.drained();
    this.onClose();
  }
}
