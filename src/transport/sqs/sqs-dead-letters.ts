import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Envelope } from '../../core/envelope.js';
import { ConfigError } from '../../core/errors.js';
import {
  deadLetterHeaders,
  DEFAULT_DEAD_LETTER_LIMIT,
  fitDeadLetter,
  readDeadLetter,
  refuseCutReplay,
  replayHeaders,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
} from '../dead-letters.js';
import type { DeadLetterOutcome } from '../settler.js';
import type { SqsSettings } from './sqs-config.js';
import { normaliseLambdaRecord, queueNameOfArn } from './sqs-lambda-event.js';
import type { SqsLambdaDeadLetter } from './sqs-lambda-handler.js';
import {
  LOG_ID_HEADER,
  sqsPublishInput,
  sqsSendInput,
  SQS_MAX_MESSAGE_BYTES,
  withAttributes,
} from './sqs-message.js';
import { sqsEnvelope, sqsRecordOf, unreadAttributes, type SqsRecord } from './sqs-record.js';
import type { SqsTopology } from './sqs-topology.js';

/**
 * Header of a dead letter stored by `sqsHandler`: the name of the queue its record came from (the
 * function's event source), where a replay sends it back. A letter without it came from a group queue
 * of the transport, and goes back to the group's queue of its topic.
 */
export const SOURCE_QUEUE_HEADER = 'oncemq-dead-source-queue';

/** A replay is a new copy: it does not name the log message of the original, nor where it died. */
function replayCopyHeaders(headers: Record<string, string>): Record<string, string> {
  Reflect.deleteProperty(headers, LOG_ID_HEADER);
  Reflect.deleteProperty(headers, SOURCE_QUEUE_HEADER);
  return headers;
}

/** A delivery to dead-letter: the record received, its envelope, the outcome, and where it came from. */
export interface SqsDeadLetterInput {
  readonly record: SqsRecord;
  readonly envelope: Envelope;
  readonly outcome: DeadLetterOutcome;
  /** The group dead-lettering it: the subscription's, or for Lambda the pipeline's (its outcome's). */
  readonly group: string;
  /** The queue a replay goes back to, when it is not the group's queue of the topic (a Lambda's). */
  readonly sourceQueue?: string | undefined;
}

/**
 * Sends the dead letter of a delivery to a dead-letter queue: its headers and body with the reason,
 * error, topic, key and attempt (the dead-letter headers) as message attributes, cut to
 * fit SQS's 256 KiB where it must; the attributes of another producer that have no text header kept as
 * they came. Once SQS stored it, `ack` lets the original go (a failed send throws before it).
 */
export async function sendDeadLetter(
  client: SQSClient,
  queueUrl: string,
  input: SqsDeadLetterInput,
  ack: () => Promise<void> = () => Promise.resolve(),
): Promise<void> {
  const { record, envelope, outcome } = input;
  const error = 'error' in outcome ? outcome.error : undefined;
  const headers = deadLetterHeaders(envelope, {
    group: input.group,
    reason: outcome.reason,
    error,
    key: outcome.key,
    deliveryCount: outcome.deliveryCount,
  });
  if (input.sourceQueue !== undefined) headers[SOURCE_QUEUE_HEADER] = input.sourceQueue;
  // base64 makes a body that is not text a third larger.
  const copy = fitDeadLetter(
    { headers, body: envelope.body },
    { maxBytes: Math.floor((SQS_MAX_MESSAGE_BYTES * 3) / 4) },
  );
  await client.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      ...withAttributes(
        sqsSendInput({ headers: copy.headers, body: copy.body }),
        unreadAttributes(record, envelope),
      ),
    }),
  );
  await ack();
}

/** A dead letter read from the queue, with the handle that deletes it. */
interface Stored {
  readonly letter: DeadLetter;
  readonly message: Message;
}

/**
 * The dead letters of a group: copies in the group's own dead-letter queue, with the reason, error,
 * topic, key and attempt as message attributes. Listing reads the whole queue without consuming it
 * (what it read is invisible to another reader meanwhile); replay sends a copy to the group's queue of
 * the letter's topic, confirmed, before the letter is deleted.
 */
export class SqsDeadLetters implements DeadLetters {
  readonly #client: SQSClient;
  readonly #topology: SqsTopology;
  readonly #settings: SqsSettings;

  constructor(client: SQSClient, settings: SqsSettings, topology: SqsTopology) {
    this.#client = client;
    this.#settings = settings;
    this.#topology = topology;
  }

  #read(message: Message): Stored {
    const record = sqsRecordOf(message);
    const envelope = sqsEnvelope(record, { topic: '' });
    const details = { queueMessageId: record.messageId, receiveCount: record.receiveCount };
    return { letter: readDeadLetter(record.messageId, envelope.headers, envelope.body, details), message };
  }

  /** Reads every letter of the group's queue; `act` may delete some (it answers their SQS ids). */
  async #scan(
    group: string,
    act?: (stored: readonly Stored[]) => Promise<ReadonlySet<string>>,
  ): Promise<Stored[]> {
    const url = await this.#topology.deadLetters(group, false);
    const all: Stored[] = [];
    await this.#topology.scan(url, async (messages) => {
      const stored = messages.map((message) => this.#read(message));
      all.push(...stored);
      return act === undefined ? new Set() : act(stored);
    });
    return all;
  }

  async list(query: DeadLetterQuery): Promise<readonly DeadLetter[]> {
    const limit = query.limit ?? DEFAULT_DEAD_LETTER_LIMIT;
    const letters = (await this.#scan(query.group))
      .map((stored) => stored.letter)
      .filter((letter) => query.reason === undefined || letter.reason === query.reason);
    letters.sort((a, b) => a.deadAt.getTime() - b.deadAt.getTime());
    return letters.slice(0, limit);
  }

  async replay(group: string, ids: readonly string[]): Promise<number> {
    const wanted = new Set(ids);
    let replayed = 0;
    // A refusal ends the replay once the scan has given back what it holds: thrown inside the scan, it
    // would leave the page it was read in invisible, and the letters would vanish from a listing.
    let refused: DeadLetter | undefined;
    await this.#scan(group, async (stored) => {
      const gone = new Set<string>();
      for (const { letter, message } of stored) {
        if (!wanted.has(letter.id) || refused !== undefined) continue;
        if (letter.cut !== undefined) {
          refused = letter;
          continue;
        }
        const queueUrl = await this.#replayQueue(letter, group);
        const input = sqsPublishInput(
          { topic: letter.topic, body: letter.body, headers: replayCopyHeaders(replayHeaders(letter)) },
          { fifo: this.#settings.fifo, deduplicationId: `replay-${letter.id}` },
        );
        const record = sqsRecordOf(message);
        const raw = unreadAttributes(record, { headers: letter.headers });
        await this.#client.send(
          new SendMessageCommand({ QueueUrl: queueUrl, ...withAttributes(input, raw) }),
        );
        await this.#delete(group, message);
        gone.add(letter.id);
        replayed++;
      }
      return gone;
    });
    if (refused !== undefined) refuseCutReplay(refused);
    return replayed;
  }

  /** Where a letter's replay goes: the queue a Lambda read it from, else the group's queue of its topic. */
  async #replayQueue(letter: DeadLetter, group: string): Promise<string> {
    const source = letter.headers[SOURCE_QUEUE_HEADER];
    if (source === undefined) return this.#topology.groupQueue(letter.topic, group);
    const url = await this.#topology.find(source);
    if (url === undefined) {
      throw new ConfigError(
        'queue',
        `SQS: the queue ${source} that dead letter ${letter.id} came from is not there`,
      );
    }
    return url;
  }

  /**
   * Stores a dead letter of `sqsHandler` in the dead-letter queue of its outcome's group (created if
   * missing), with the queue its record came from: `sqsHandler(pipeline, { deadLetter:
   * transport.deadLetters })` puts Lambda's dead letters where the transport's are, for `list`, `replay`
   * (back to that queue) and `purge`.
   */
  async store(letter: SqsLambdaDeadLetter): Promise<void> {
    await sendDeadLetter(this.#client, await this.#topology.deadLetters(letter.outcome.group, true), {
      record: normaliseLambdaRecord(letter.record),
      envelope: letter.envelope,
      outcome: letter.outcome,
      group: letter.outcome.group,
      sourceQueue: queueNameOfArn(letter.record.eventSourceARN),
    });
  }

  async purge(group: string, ids: readonly string[]): Promise<number> {
    const wanted = new Set(ids);
    let purged = 0;
    await this.#scan(group, async (stored) => {
      const gone = new Set<string>();
      for (const { letter, message } of stored) {
        if (!wanted.has(letter.id)) continue;
        await this.#delete(group, message);
        gone.add(letter.id);
        purged++;
      }
      return gone;
    });
    return purged;
  }

  async #delete(group: string, message: Message): Promise<void> {
    await this.#client.send(
      new DeleteMessageCommand({
        QueueUrl: await this.#topology.deadLetters(group, false),
        ReceiptHandle: message.ReceiptHandle ?? '',
      }),
    );
  }

  async depth(group: string): Promise<number> {
    const answer = await this.#client.send(
      new GetQueueAttributesCommand({
        QueueUrl: await this.#topology.deadLetters(group, false),
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    const attributes = answer.Attributes ?? {};
    return (
      Number(attributes.ApproximateNumberOfMessages ?? 0) +
      Number(attributes.ApproximateNumberOfMessagesNotVisible ?? 0)
    );
  }
}
