import { DeleteMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { DeadLetterOutcome, RetryOutcome, Settler } from '../settler.js';
import { visibilitySeconds, type SqsDelivery } from './sqs-delivery.js';
import { sendDeadLetter } from './sqs-dead-letters.js';
import type { UnchargedRetries } from '../uncharged-retries.js';

/** What a subscription's settler acts through. */
export interface SqsSettlerContext {
  readonly client: SQSClient;
  readonly group: string;
  /** The group's dead-letter queue. */
  readonly deadLetterUrl: () => Promise<string>;
  readonly uncharged: UnchargedRetries;
  readonly failureBackoffMs: number;
}

/**
 * Deletes of one queue asked in the same turn of the event loop, sent as `DeleteMessageBatch` calls of
 * up to 10 (a batch's acks go out together); each caller learns whether its own entry failed.
 */
class DeleteBatches {
  readonly #client: SQSClient;
  readonly #pending = new Map<
    string,
    { handle: string; resolve: () => void; reject: (error: Error) => void }[]
  >();

  constructor(client: SQSClient) {
    this.#client = client;
  }

  delete(queueUrl: string, handle: string): Promise<void> {
    return new Promise((resolve, reject) => {
      let list = this.#pending.get(queueUrl);
      if (list === undefined) {
        list = [];
        this.#pending.set(queueUrl, list);
        setImmediate(() => void this.#flush(queueUrl));
      }
      list.push({ handle, resolve, reject });
    });
  }

  async #flush(queueUrl: string): Promise<void> {
    const list = this.#pending.get(queueUrl) ?? [];
    this.#pending.delete(queueUrl);
    for (let at = 0; at < list.length; at += 10) {
      const chunk = list.slice(at, at + 10);
      try {
        const answer = await this.#client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: chunk.map((entry, index) => ({ Id: String(index), ReceiptHandle: entry.handle })),
          }),
        );
        const failed = new Map((answer.Failed ?? []).map((entry) => [entry.Id, entry.Message ?? entry.Code]));
        chunk.forEach((entry, index) => {
          const why = failed.get(String(index));
          if (why === undefined) entry.resolve();
          else entry.reject(new Error(`SQS refused a delete: ${why}`));
        });
      } catch (error) {
        for (const entry of chunk) entry.reject(error as Error);
      }
    }
  }
}

/**
 * Settles an SQS delivery: an ack deletes it (deletes of one turn batched); a retry leaves it invisible
 * for the retry's delay (at most 12 hours), so SQS's own redelivery, which it counts, brings it back; a
 * dead letter is sent to the group's dead-letter queue, confirmed, before the original is deleted; a
 * processor that threw makes it visible again after the failure backoff, uncharged.
 */
export class SqsSettler implements Settler<SqsDelivery> {
  readonly #ctx: SqsSettlerContext;
  readonly #deletes: DeleteBatches;

  constructor(ctx: SqsSettlerContext) {
    this.#ctx = ctx;
    this.#deletes = new DeleteBatches(ctx.client);
  }

  async ack(delivery: SqsDelivery): Promise<void> {
    await this.#deletes.delete(delivery.queueUrl, delivery.record.receiptHandle);
    this.#ctx.uncharged.forget(delivery.record.messageId);
  }

  async retry(delivery: SqsDelivery, outcome: RetryOutcome): Promise<void> {
    if (outcome.nextDeliveryCount <= delivery.envelope.deliveryCount) {
      this.#ctx.uncharged.add(delivery.record.messageId);
    }
    await delivery.changeVisibility(visibilitySeconds(outcome.delayMs));
  }

  async deadLetter(delivery: SqsDelivery, outcome: DeadLetterOutcome): Promise<void> {
    await sendDeadLetter(
      this.#ctx.client,
      await this.#ctx.deadLetterUrl(),
      { record: delivery.record, envelope: delivery.envelope, outcome, group: this.#ctx.group },
      () => this.ack(delivery),
    );
  }

  async fail(delivery: SqsDelivery): Promise<void> {
    this.#ctx.uncharged.add(delivery.record.messageId);
    await delivery.changeVisibility(visibilitySeconds(this.#ctx.failureBackoffMs));
  }
}
