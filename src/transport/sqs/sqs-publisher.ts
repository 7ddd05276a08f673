import { SendMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import { KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { ConfigError } from '../../core/errors.js';
import type { OutgoingMessage, PublishReceipt } from '../transport.js';
import type { SqsSettings } from './sqs-config.js';
import {
  fifoId,
  LOG_ID_HEADER,
  sqsMessageBytes,
  sqsPublishInput,
  sqsSendInput,
  SQS_MAX_MESSAGE_BYTES,
  type SqsSendMessage,
} from './sqs-message.js';
import { sqsEnvelope, sqsRecordOf } from './sqs-record.js';
import { SqsBatchSends } from './sqs-send-batch.js';
import type { SqsTopology } from './sqs-topology.js';

/** Checks a topic name: non-empty text (its queue names are made from it). */
export function validSqsTopic(topic: string): string {
  if (typeof topic !== 'string' || topic.length === 0) {
    throw new ConfigError('topic', 'must be a non-empty string');
  }
  return topic;
}

/**
 * The SendMessage fields of a group queue's copy of a log message read back: its headers and body as
 * the log has them, and the log's message id. Written anew rather than with the log's attributes as they
 * are, so that a message whose headers took all of SQS's 10 attributes packs them to make room.
 */
function copyOf(message: Message, fifo: boolean, logId: string): SqsSendMessage {
  const envelope = sqsEnvelope(sqsRecordOf(message), { topic: '' });
  const headers: Record<string, string> = { ...envelope.headers, [LOG_ID_HEADER]: logId };
  const key = headers[KEY_HEADER];
  return sqsSendInput({
    headers,
    body: envelope.body,
    fifo: fifo
      ? {
          groupId: fifoId(headers[ORDERING_KEY_HEADER] ?? key ?? logId),
          deduplicationId: fifoId(key ?? logId),
        }
      : undefined,
  });
}

/**
 * Publishes: every message is stored first in its topic's log queue (its id is the receipt's broker id),
 * then a copy goes to the queue of every group on the topic (SQS has no fan-out of its own).
 */
export class SqsPublisher {
  readonly #client: SQSClient;
  readonly #settings: SqsSettings;
  readonly #topology: SqsTopology;

  constructor(client: SQSClient, settings: SqsSettings, topology: SqsTopology) {
    this.#client = client;
    this.#settings = settings;
    this.#topology = topology;
  }

  async publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const topic = validSqsTopic(message.topic);
    const logInput = sqsPublishInput(message, { fifo: false });
    const bytes = sqsMessageBytes(logInput) + 64;
    if (bytes > SQS_MAX_MESSAGE_BYTES) {
      throw new ConfigError(
        'body',
        `the message is ${bytes} bytes with its attributes, more than SQS's ${SQS_MAX_MESSAGE_BYTES}`,
      );
    }
    const logUrl = await this.#topology.log(topic);
    const stored = await this.#client.send(new SendMessageCommand({ QueueUrl: logUrl, ...logInput }));
    const logId = stored.MessageId ?? '';
    const groups = await this.#topology.groupQueues(topic);
    const copy = sqsPublishInput(
      { ...message, headers: { ...message.headers, [LOG_ID_HEADER]: logId } },
      { fifo: this.#settings.fifo },
    );
    await Promise.all(
      groups.map((url) => this.#client.send(new SendMessageCommand({ QueueUrl: url, ...copy }))),
    );
    return { brokerId: logId, topic, messageId: logId, position: { queue: this.#settings.names.log(topic) } };
  }

  /**
   * Copies the topic's log into a new group's queue (a group starting at `earliest`); the messages stay
   * in the log for the other groups. A message SQS does not store in the group's queue fails the copy,
   * named, once every other message is copied.
   */
  async copyLog(topic: string, groupUrl: string): Promise<number> {
    const logUrl = await this.#topology.log(topic);
    const sends = new SqsBatchSends(this.#client, groupUrl);
    let copied = 0;
    await this.#topology.scan(logUrl, async (messages) => {
      await sends.send(
        messages.map((message) => ({
          label: `log message ${message.MessageId ?? '?'}`,
          input: copyOf(message, this.#settings.fifo, message.MessageId ?? ''),
        })),
      );
      copied += messages.length;
      return new Set();
    });
    sends.check(`copying the log of topic ${topic} into ${groupUrl}`);
    return copied;
  }
}
