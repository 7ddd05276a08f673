import { ChangeMessageVisibilityCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { Envelope } from '../../core/envelope.js';
import { errorText } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { SettleableDelivery } from '../settle-batch.js';
import type { DeliveryResult, Settler } from '../settler.js';
import { SerialSettle } from '../serial-settle.js';
import { SQS_MAX_VISIBILITY_SECONDS } from './sqs-config.js';
import { sqsEnvelope, type SqsRecord } from './sqs-record.js';
import type { UnchargedRetries } from '../uncharged-retries.js';

/** SQS counts visibility in whole seconds, at most 12 hours: a time is rounded up, then capped. */
export function visibilitySeconds(ms: number): number {
  return Math.min(SQS_MAX_VISIBILITY_SECONDS, Math.max(0, Math.ceil(ms / 1000)));
}

/** What the deliveries of one subscription share. */
export interface SqsDeliveryContext {
  readonly client: SQSClient;
  readonly group: string;
  readonly visibilityMs: number;
  readonly uncharged: UnchargedRetries;
  readonly logger: Logger;
  readonly settler: Settler<SqsDelivery>;
}

/**
 * One received message of a group queue: its envelope carries SQS's receive count less the receives
 * oncemq did not charge (a `busy` retry, a processor that threw), and a keep-alive that extends its
 * visibility. Keep-alives and the settle go one after the other; it is settled at most once.
 */
export class SqsDelivery implements SettleableDelivery {
  readonly record: SqsRecord;
  readonly queueUrl: string;
  readonly envelope: Envelope;
  readonly #ctx: SqsDeliveryContext;
  readonly #calls = new SerialSettle();

  constructor(ctx: SqsDeliveryContext, queueUrl: string, topic: string, record: SqsRecord) {
    this.#ctx = ctx;
    this.queueUrl = queueUrl;
    this.record = record;
    const seconds = Math.max(1, visibilitySeconds(ctx.visibilityMs));
    const read = sqsEnvelope(record, {
      topic,
      keepAlive: {
        everyMs: Math.max(250, Math.floor((seconds * 1000) / 3)),
        extend: () => this.#calls.keepAlive(() => this.changeVisibility(seconds)),
      },
    });
    const deliveryCount = Math.max(1, record.receiveCount - ctx.uncharged.count(record.messageId));
    this.envelope = Object.freeze({ ...read, deliveryCount: Math.max(read.deliveryCount, deliveryCount) });
  }

  /** Hides the message for `seconds` more from now (0: visible at once). */
  async changeVisibility(seconds: number): Promise<void> {
    await this.#ctx.client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.queueUrl,
        ReceiptHandle: this.record.receiptHandle,
        VisibilityTimeout: seconds,
      }),
    );
  }

  /** Acts on the result at SQS. A failed settle is logged: SQS delivers the message again. */
  settle(result: DeliveryResult): Promise<void> {
    return this.#calls.settle(this.#ctx.settler, this, result, (error) => {
      this.#ctx.logger.warn('oncemq: an SQS settle failed; SQS delivers the message again', {
        group: this.#ctx.group,
        messageId: this.record.messageId,
        error: errorText(error),
      });
    });
  }

  /** Leaves the message to SQS unprocessed: visible again at once, uncharged. */
  giveBack(): Promise<void> {
    return this.settle({ error: new Error('the subscription closed before processing it') });
  }
}
