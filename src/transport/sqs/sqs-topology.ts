import {
  ChangeMessageVisibilityBatchCommand,
  CreateQueueCommand,
  GetQueueUrlCommand,
  ListQueuesCommand,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { ConfigError } from '../../core/errors.js';
import type { SqsSettings } from './sqs-config.js';

/** Longest retention SQS keeps a message: 14 days, for group and dead-letter queues. */
const MAX_RETENTION_SECONDS = String(14 * 86_400);

/** How long a scan holds the messages it read before giving them back. */
const SCAN_HOLD_SECONDS = 60;

/** Whether `error` is SQS's answer for a queue that is not there. */
export function queueMissing(error: unknown): boolean {
  return (
    error instanceof QueueDoesNotExist ||
    (error instanceof Error && /NonExistentQueue|QueueDoesNotExist/.test(error.name + error.message))
  );
}

/**
 * The queues of a transport: each topic's log queue, each group's queue on a topic, each group's
 * dead-letter queue; created on first use (idempotent) and their URLs kept.
 */
export class SqsTopology {
  readonly #client: SQSClient;
  readonly #settings: SqsSettings;
  readonly #urls = new Map<string, Promise<string>>();

  constructor(client: SQSClient, settings: SqsSettings) {
    this.#client = client;
    this.#settings = settings;
  }

  /** The URL of queue `name`, or `undefined` when it is not there. */
  async find(name: string): Promise<string | undefined> {
    const known = this.#urls.get(name);
    if (known !== undefined) return known;
    try {
      const answer = await this.#client.send(new GetQueueUrlCommand({ QueueName: name }));
      const url = answer.QueueUrl ?? '';
      this.#urls.set(name, Promise.resolve(url));
      return url;
    } catch (error) {
      if (queueMissing(error)) return undefined;
      throw error;
    }
  }

  /** The URL of queue `name`, created with `attributes` when missing. */
  ensure(name: string, attributes: Record<string, string>): Promise<string> {
    let url = this.#urls.get(name);
    if (url === undefined) {
      url = this.#client
        .send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))
        .then((answer) => answer.QueueUrl ?? '');
      url.catch(() => this.#urls.delete(name));
      this.#urls.set(name, url);
    }
    return url;
  }

  /** The topic's log queue (a standard queue keeping every publish for the retention). */
  log(topic: string): Promise<string> {
    return this.ensure(this.#settings.names.log(topic), {
      MessageRetentionPeriod: String(this.#settings.retentionSeconds),
    });
  }

  /** Attributes of a group queue: 14 days of retention; FIFO with explicit deduplication ids. */
  #groupAttributes(): Record<string, string> {
    return {
      MessageRetentionPeriod: MAX_RETENTION_SECONDS,
      ...(this.#settings.fifo ? { FifoQueue: 'true', ContentBasedDeduplication: 'false' } : {}),
    };
  }

  /**
   * The queue of `group` on `topic`, and whether this call created it (the group is new on the topic:
   * `from` decides whether the log is copied into it).
   */
  async group(topic: string, group: string): Promise<{ url: string; created: boolean }> {
    const name = this.#settings.names.group(topic, group);
    const found = await this.find(name);
    if (found !== undefined) return { url: found, created: false };
    return { url: await this.ensure(name, this.#groupAttributes()), created: true };
  }

  /** The queue of `group` on `topic` (a replay's target): created by the group's subscribe, never here. */
  async groupQueue(topic: string, group: string): Promise<string> {
    const name = this.#settings.names.group(topic, group);
    const url = await this.find(name);
    if (url === undefined) {
      throw new ConfigError('group', `SQS: group ${group} has no queue on topic ${topic} (${name})`);
    }
    return url;
  }

  /** The dead-letter queue of `group`, created when `create`, else an error naming it when missing. */
  async deadLetters(group: string, create: boolean): Promise<string> {
    const name = this.#settings.names.deadLetters(group);
    if (create) return this.ensure(name, { MessageRetentionPeriod: MAX_RETENTION_SECONDS });
    const url = await this.find(name);
    if (url === undefined) {
      throw new ConfigError('group', `SQS: group ${group} has no dead-letter queue (${name})`);
    }
    return url;
  }

  /** URLs of every group queue on `topic` (ListQueues by the topic's prefix, every page). */
  async groupQueues(topic: string): Promise<string[]> {
    const prefix = this.#settings.names.groupPrefix(topic);
    const urls: string[] = [];
    let next: string | undefined;
    do {
      const page = await this.#client.send(
        new ListQueuesCommand({ QueueNamePrefix: prefix, MaxResults: 1000, NextToken: next }),
      );
      urls.push(...(page.QueueUrls ?? []));
      next = page.NextToken;
    } while (next !== undefined);
    return urls;
  }

  /**
   * Reads every message of a queue without consuming it: receives until an answer is empty, holding
   * what it read invisible meanwhile, hands each page to `page` (which may delete messages), then makes
   * the ones still held visible again — also when `page` throws, so that a failed page does not hide its
   * messages for the hold's length (a give-back of a message the page deleted fails alone, unseen).
   * Another reader of the queue meanwhile sees none of them.
   */
  async scan(url: string, page: (messages: Message[]) => Promise<ReadonlySet<string>>): Promise<void> {
    let held: Message[] = [];
    try {
      for (;;) {
        const answer = await this.#client.send(
          new ReceiveMessageCommand({
            QueueUrl: url,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 0,
            VisibilityTimeout: SCAN_HOLD_SECONDS,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
          }),
        );
        const messages = answer.Messages ?? [];
        if (messages.length === 0) break;
        held.push(...messages);
        const gone = await page(messages);
        held = held.filter((message) => !gone.has(message.MessageId ?? ''));
      }
    } finally {
      for (let at = 0; at < held.length; at += 10) {
        await this.#client
          .send(
            new ChangeMessageVisibilityBatchCommand({
              QueueUrl: url,
              Entries: held.slice(at, at + 10).map((message, index) => ({
                Id: String(index),
                ReceiptHandle: message.ReceiptHandle ?? '',
                VisibilityTimeout: 0,
              })),
            }),
          )
          .catch(() => undefined);
      }
    }
  }
}
