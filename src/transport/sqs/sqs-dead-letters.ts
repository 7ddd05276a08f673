import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import {
  DEFAULT_DEAD_LETTER_LIMIT,
  readDeadLetter,
  refuseCutReplay,
  replayHeaders,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
} from '../dead-letters.js';
import type { SqsSettings } from './sqs-config.js';
import { LOG_ID_HEADER, sqsPublishInput, withAttributes } from './sqs-message.js';
import { sqsEnvelope, sqsRecordOf, unreadAttributes } from './sqs-record.js';
import type { SqsTopology } from './sqs-topology.js';

/** A replay is a new copy: it does not name the log message of the original. */
function withoutLogId(headers: Record<string, string>): Record<string, string> {
  Reflect.deleteProperty(headers, LOG_ID_HEADER);
  return headers;
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
    await this.#scan(group, async (stored) => {
      const gone = new Set<string>();
      for (const { letter, message } of stored) {
        if (!wanted.has(letter.id)) continue;
        refuseCutReplay(letter);
        const queueUrl = await this.#topology.groupQueue(letter.topic, group);
        const input = sqsPublishInput(
          { topic: letter.topic, body: letter.body, headers: withoutLogId(replayHeaders(letter)) },
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
    return replayed;
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
