import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ListDeadLetterSourceQueuesCommand,
  SendMessageCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { ConfigError } from '../../core/errors.js';
import {
  DEAD_LETTER_HEADERS,
  DEAD_LETTER_HEADER_NAMES,
  DEFAULT_DEAD_LETTER_LIMIT,
  readDeadLetter,
  type DeadLetter,
  type DeadLetterQuery,
  type DeadLetters,
} from '../dead-letters.js';
import { queueNameOfArn } from './sqs-lambda-event.js';
import { sqsEnvelope, sqsRecordOf } from './sqs-record.js';
import type { SqsTopology } from './sqs-topology.js';

/** The reason listed for a message SQS's redrive policy moved (it carries none of oncemq's). */
export const REDRIVE_REASON = 'redrive: received more than maxReceiveCount';

/** A message of the queue, as listed, with what its replay needs. */
interface Stored {
  readonly letter: DeadLetter;
  readonly message: Message;
  /** The name of the queue it was moved from, when SQS says (`DeadLetterQueueSourceArn`). */
  readonly source: string | undefined;
}

/**
 * A dead-letter queue that a redrive policy fills (`RedrivePolicy.deadLetterTargetArn` of a source queue
 * names it): SQS moves a message there after `maxReceiveCount` receives, as it was, without oncemq's
 * dead-letter attributes. Listing reads the whole queue without consuming it (held invisible for a
 * minute meanwhile) and names each message's reason {@link REDRIVE_REASON} (a message that does carry
 * oncemq's dead-letter attributes is read with them); replay sends a message back, its body and
 * attributes as they are, to the queue it was moved from (`DeadLetterQueueSourceArn`, else the one
 * queue whose redrive policy names this one), confirmed, before deleting it. Nothing is created: the
 * queue, or a replay's source queue, not being there is an error.
 */
export class SqsRedriveDeadLetters implements DeadLetters {
  readonly #client: SQSClient;
  readonly #topology: SqsTopology;
  readonly #queue: string;

  constructor(client: SQSClient, topology: SqsTopology, queue: string) {
    this.#client = client;
    this.#topology = topology;
    this.#queue = queue;
  }

  async #url(): Promise<string> {
    const url = await this.#topology.find(this.#queue);
    if (url === undefined) throw new ConfigError('queue', `SQS: there is no queue ${this.#queue}`);
    return url;
  }

  #read(group: string, message: Message): Stored {
    const record = sqsRecordOf(message);
    const envelope = sqsEnvelope(record, { topic: '' });
    const sourceArn = message.Attributes?.DeadLetterQueueSourceArn;
    const source = sourceArn === undefined ? undefined : queueNameOfArn(sourceArn);
    const details = {
      queueMessageId: record.messageId,
      receiveCount: record.receiveCount,
      sourceQueue: source,
    };
    const ours = envelope.headers[DEAD_LETTER_HEADERS.reason] !== undefined;
    const headers = ours
      ? envelope.headers
      : {
          ...envelope.headers,
          [DEAD_LETTER_HEADERS.group]: group,
          [DEAD_LETTER_HEADERS.reason]: REDRIVE_REASON,
          [DEAD_LETTER_HEADERS.topic]: source ?? '',
          [DEAD_LETTER_HEADERS.brokerId]: record.messageId,
        };
    const letter = readDeadLetter(record.messageId, headers, envelope.body, details);
    return { letter, message, source };
  }

  async #scan(
    group: string,
    act?: (stored: readonly Stored[]) => Promise<ReadonlySet<string>>,
  ): Promise<Stored[]> {
    const all: Stored[] = [];
    await this.#topology.scan(await this.#url(), async (messages) => {
      const stored = messages.map((message) => this.#read(group, message));
      all.push(...stored);
      return act === undefined ? new Set() : act(stored);
    });
    return all;
  }

  async list(query: DeadLetterQuery): Promise<readonly DeadLetter[]> {
    const letters = (await this.#scan(query.group))
      .map((stored) => stored.letter)
      .filter((letter) => query.reason === undefined || letter.reason === query.reason);
    return letters.slice(0, query.limit ?? DEFAULT_DEAD_LETTER_LIMIT);
  }

  /** The URL of the queue a message goes back to. */
  async #sourceUrl(stored: Stored): Promise<string> {
    if (stored.source !== undefined) {
      const url = await this.#topology.find(stored.source);
      if (url === undefined) {
        throw new ConfigError(
          'queue',
          `SQS: ${stored.letter.id} came from queue ${stored.source}, which is not there`,
        );
      }
      return url;
    }
    const answer = await this.#client.send(
      new ListDeadLetterSourceQueuesCommand({ QueueUrl: await this.#url(), MaxResults: 2 }),
    );
    const [only, ...more] = answer.queueUrls ?? [];
    if (only === undefined || more.length > 0) {
      throw new ConfigError(
        'queue',
        `SQS: ${stored.letter.id} does not say which queue it came from, and ${only === undefined ? 'no queue' : 'more than one queue'} redrives into ${this.#queue}`,
      );
    }
    return only;
  }

  async replay(group: string, ids: readonly string[]): Promise<number> {
    return this.#each(group, ids, async (stored) => {
      const { message } = stored;
      const attributes: Record<string, MessageAttributeValue> = {};
      for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
        if (!DEAD_LETTER_HEADER_NAMES.has(name)) attributes[name] = value;
      }
      const groupId = message.Attributes?.MessageGroupId;
      await this.#client.send(
        new SendMessageCommand({
          QueueUrl: await this.#sourceUrl(stored),
          MessageBody: message.Body ?? '',
          MessageAttributes: attributes,
          ...(groupId === undefined
            ? {}
            : { MessageGroupId: groupId, MessageDeduplicationId: `replay-${stored.letter.id}` }),
        }),
      );
    });
  }

  purge(group: string, ids: readonly string[]): Promise<number> {
    return this.#each(group, ids, () => Promise.resolve());
  }

  /** Does `act` to each chosen message, then deletes it from the queue; answers how many. */
  async #each(
    group: string,
    ids: readonly string[],
    act: (stored: Stored) => Promise<void>,
  ): Promise<number> {
    const wanted = new Set(ids);
    let done = 0;
    const url = await this.#url();
    await this.#scan(group, async (stored) => {
      const gone = new Set<string>();
      for (const one of stored) {
        if (!wanted.has(one.letter.id)) continue;
        await act(one);
        await this.#client.send(
          new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: one.message.ReceiptHandle ?? '' }),
        );
        gone.add(one.letter.id);
        done++;
      }
      return gone;
    });
    return done;
  }

  async depth(): Promise<number> {
    const answer = await this.#client.send(
      new GetQueueAttributesCommand({
        QueueUrl: await this.#url(),
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
