import { ChangeMessageVisibilityBatchCommand, GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { SQS_MAX_VISIBILITY_SECONDS } from './sqs-config.js';
import { visibilitySeconds } from './sqs-delivery.js';
import { queueNameOfArn, type SqsLambdaRecord } from './sqs-lambda-event.js';

/**
 * Longest delay a Lambda retry gets, in seconds: 11 h 40 min. SQS counts its 12 hours from the receive,
 * and the event source received the record before the invocation: at most its batching window (5 min)
 * plus the function's timeout (15 min) earlier.
 */
export const SQS_LAMBDA_MAX_RETRY_SECONDS = SQS_MAX_VISIBILITY_SECONDS - 20 * 60;

/** A record to hide for its retry's delay. */
export interface SqsLambdaRetry {
  readonly record: SqsLambdaRecord;
  readonly delayMs: number;
}

/**
 * Gives the records `sqsHandler` reports failed for a retry the retry's delay, by setting their
 * visibility (`ChangeMessageVisibilityBatch`, by the queue of each record's `eventSourceARN`) before
 * Lambda gets the answer; Lambda then leaves them where they are and SQS brings them back after the
 * delay instead of the queue's visibility timeout. A change that fails is logged: that record comes
 * back after the queue's visibility timeout, as it would without this.
 */
export class SqsLambdaRetryDelays {
  readonly #client: () => SQSClient;
  readonly #logger: Logger;
  readonly #urls = new Map<string, Promise<string>>();

  constructor(client: () => SQSClient, logger: Logger) {
    this.#client = client;
    this.#logger = logger;
  }

  /** The queue URL of an ARN (`GetQueueUrl` by its name and account), kept. */
  #url(arn: string): Promise<string> {
    let url = this.#urls.get(arn);
    if (url === undefined) {
      const account = arn.split(':')[4];
      url = this.#client()
        .send(
          new GetQueueUrlCommand({
            QueueName: queueNameOfArn(arn),
            ...(account === undefined || account === '' ? {} : { QueueOwnerAWSAccountId: account }),
          }),
        )
        .then((answer) => answer.QueueUrl ?? '');
      url.catch(() => this.#urls.delete(arn));
      this.#urls.set(arn, url);
    }
    return url;
  }

  /** Hides each record for its delay (whole seconds, at most {@link SQS_LAMBDA_MAX_RETRY_SECONDS}). */
  async delay(retries: readonly SqsLambdaRetry[]): Promise<void> {
    const byQueue = new Map<string, SqsLambdaRetry[]>();
    for (const retry of retries) {
      const list = byQueue.get(retry.record.eventSourceARN) ?? [];
      list.push(retry);
      byQueue.set(retry.record.eventSourceARN, list);
    }
    const calls: Promise<void>[] = [];
    for (const [arn, list] of byQueue) {
      for (let at = 0; at < list.length; at += 10) calls.push(this.#change(arn, list.slice(at, at + 10)));
    }
    await Promise.all(calls);
  }

  async #change(arn: string, retries: readonly SqsLambdaRetry[]): Promise<void> {
    try {
      const answer = await this.#client().send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: await this.#url(arn),
          Entries: retries.map(({ record, delayMs }, index) => ({
            Id: String(index),
            ReceiptHandle: record.receiptHandle,
            VisibilityTimeout: Math.min(SQS_LAMBDA_MAX_RETRY_SECONDS, visibilitySeconds(delayMs)),
          })),
        }),
      );
      for (const failed of answer.Failed ?? []) {
        this.#warn(arn, retries[Number(failed.Id)]?.record.messageId, `${failed.Code}: ${failed.Message}`);
      }
    } catch (error) {
      for (const { record } of retries) this.#warn(arn, record.messageId, errorText(error));
    }
  }

  #warn(arn: string, messageId: string | undefined, error: string): void {
    this.#logger.warn(
      "oncemq: a Lambda retry's delay could not be set; it comes back after the queue's visibility timeout",
      { queue: queueNameOfArn(arn), messageId, error },
    );
  }
}

/** The client a handler makes when given none: the function's region and role, as Lambda sets them. */
export function defaultLambdaSqsClient(): SQSClient {
  return new SQSClient({});
}
