import { setTimeout as sleep } from 'node:timers/promises';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { PermanentError, TransportUnavailableError } from '../../core/errors.js';
import { sqsMessageBytes, SQS_MAX_MESSAGE_BYTES, type SqsSendMessage } from './sqs-message.js';

/** One message of {@link SqsBatchSends.send}, and how an error names it (its log message id). */
export interface SqsBatchMessage {
  readonly label: string;
  readonly input: SqsSendMessage;
}

/** How many times an entry SQS failed on its side (`SenderFault: false`) is sent in all. */
export const SQS_BATCH_ATTEMPTS = 3;

/** Entries of one `SendMessageBatch`: at most 10, and at most 256 KiB together (SQS refuses a larger batch whole). */
function chunks(messages: readonly SqsBatchMessage[]): SqsBatchMessage[][] {
  const all: SqsBatchMessage[][] = [];
  let chunk: SqsBatchMessage[] = [];
  let bytes = 0;
  for (const message of messages) {
    const size = sqsMessageBytes(message.input);
    if (chunk.length === 10 || (chunk.length > 0 && bytes + size > SQS_MAX_MESSAGE_BYTES)) {
      all.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(message);
    bytes += size;
  }
  if (chunk.length > 0) all.push(chunk);
  return all;
}

/**
 * Sends messages to one queue with `SendMessageBatch`, reading each answer's `Failed` entries: an entry
 * SQS failed on its side is sent again (up to {@link SQS_BATCH_ATTEMPTS} in all); an entry it refused
 * (`SenderFault`: too large, an attribute it does not take) is not. Every other message is sent either
 * way; {@link check} then fails if any was not stored, naming each with SQS's code and message.
 */
export class SqsBatchSends {
  readonly #client: SQSClient;
  readonly #queueUrl: string;
  #sent = 0;
  readonly #refused: string[] = [];
  readonly #unstored: string[] = [];

  constructor(client: SQSClient, queueUrl: string) {
    this.#client = client;
    this.#queueUrl = queueUrl;
  }

  /** Sends `messages` (batches of up to 10 and 256 KiB); resolves once each is stored or given up. */
  async send(messages: readonly SqsBatchMessage[]): Promise<void> {
    this.#sent += messages.length;
    for (const chunk of chunks(messages)) {
      let pending = chunk;
      for (let attempt = 1; pending.length > 0; attempt++) {
        const answer = await this.#client.send(
          new SendMessageBatchCommand({
            QueueUrl: this.#queueUrl,
            Entries: pending.map((message, index) => ({ Id: String(index), ...message.input })),
          }),
        );
        const again: SqsBatchMessage[] = [];
        for (const failed of answer.Failed ?? []) {
          const message = pending[Number(failed.Id)];
          if (message === undefined) continue;
          const why = `${message.label}: ${failed.Code ?? 'failed'}${failed.Message ? ` (${failed.Message})` : ''}`;
          if (failed.SenderFault === true) this.#refused.push(why);
          else if (attempt >= SQS_BATCH_ATTEMPTS) this.#unstored.push(why);
          else again.push(message);
        }
        pending = again;
        if (pending.length > 0) await sleep(100 * attempt);
      }
    }
  }

  /**
   * Fails when a message sent was not stored: a `PermanentError` when SQS refused one, else a
   * `TransportUnavailableError`, naming each.
   * @param what the work, for the error (`copying the log of topic t into queue q`)
   */
  check(what: string): void {
    const refused = this.#refused;
    const unstored = this.#unstored;
    if (refused.length + unstored.length === 0) return;
    const stored = this.#sent - refused.length - unstored.length;
    const text =
      `${what}: SQS stored ${stored} of ${this.#sent} messages; ` +
      [
        ...(refused.length > 0 ? [`refused ${refused.join('; ')}`] : []),
        ...(unstored.length > 0 ? [`failed after ${SQS_BATCH_ATTEMPTS} sends ${unstored.join('; ')}`] : []),
      ].join('; ');
    throw refused.length > 0 ? new PermanentError('invalid', text) : new TransportUnavailableError(text);
  }
}
