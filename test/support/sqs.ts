import { randomUUID } from 'node:crypto';
import {
  DeleteQueueCommand,
  ListQueuesCommand,
  SendMessageCommand,
  SQSClient,
  type MessageAttributeValue,
} from '@aws-sdk/client-sqs';
import type { ForeignMessage, ForeignProducer, TransportFactory } from 'oncemq/conformance';
import { SqsTransport, type SqsTransportConfig } from 'oncemq/sqs';
import { SqsNames } from './internal.js';

type TransportUnderTest = Awaited<ReturnType<TransportFactory>>;

/** ElasticMQ takes any credentials. */
export const ELASTICMQ_CREDENTIALS = Object.freeze({ accessKeyId: 'x', secretAccessKey: 'x' });

/** A client straight to the server, as another producer (or an operator) would have. */
export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({ endpoint, region: 'us-east-1', credentials: { ...ELASTICMQ_CREDENTIALS } });
}

/** Settings that keep the tests quick: a 1 s long poll, a short failure backoff. */
export const QUICK_SQS: SqsTransportConfig = Object.freeze({ longPoll: '1s', failureBackoff: '1s' });

/** Deletes every queue whose name starts with `prefix`. */
export async function deleteQueues(client: SQSClient, prefix: string): Promise<void> {
  const page = await client.send(new ListQueuesCommand({ QueueNamePrefix: prefix, MaxResults: 1000 }));
  await Promise.all(
    (page.QueueUrls ?? []).map((url) =>
      client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined),
    ),
  );
}

/** A header value of a foreign message as an SQS message attribute. */
function attribute(value: ForeignMessage['headers'][number][1]): MessageAttributeValue {
  switch (value.type) {
    case 'text':
      return { DataType: 'String', StringValue: value.value };
    case 'bytes':
      return { DataType: 'Binary', BinaryValue: value.value };
    case 'integer':
      return { DataType: 'Number', StringValue: String(value.value) };
    case 'float':
      return { DataType: 'Number', StringValue: String(value.value) };
    default:
      throw new Error(`SQS carries no ${value.type} attribute`);
  }
}

/**
 * Another producer on the same server: it sends straight to the queue of every group on the topic
 * (what oncemq's publisher does, found the same way by the topic's queue-name prefix), with its own
 * attributes and a plain text body.
 */
function foreignProducer(endpoint: string, namespace: string, fifo: boolean): ForeignProducer {
  return {
    headerTypes: ['text', 'bytes', 'integer', 'float'],
    repeatedHeaders: false,
    async publish(topic, message) {
      const client = sqsClient(endpoint);
      try {
        const prefix = sqsQueuePrefix(namespace, topic, fifo);
        const page = await client.send(new ListQueuesCommand({ QueueNamePrefix: prefix, MaxResults: 1000 }));
        const attributes = Object.fromEntries(
          message.headers.map(([name, value]) => [name, attribute(value)]),
        );
        for (const url of page.QueueUrls ?? []) {
          await client.send(
            new SendMessageCommand({
              QueueUrl: url,
              MessageBody: new TextDecoder().decode(message.body),
              MessageAttributes: attributes,
              ...(fifo ? { MessageGroupId: randomUUID(), MessageDeduplicationId: randomUUID() } : {}),
            }),
          );
        }
      } finally {
        client.destroy();
      }
    },
  };
}

/** The queue-name prefix of the group queues of `topic` (as the transport names them). */
export function sqsQueuePrefix(namespace: string, topic: string, fifo: boolean): string {
  return new SqsNames(namespace, fifo).groupPrefix(topic);
}

/** An SQS transport on ElasticMQ for one conformance case, in a namespace of its own (its queues deleted after). */
export function sqsUnderTest(endpoint: string, config: SqsTransportConfig = {}): Promise<TransportUnderTest> {
  const namespace = `t${randomUUID().slice(0, 8)}`;
  const make = (ns: string): SqsTransport =>
    new SqsTransport({
      endpoint,
      credentials: ELASTICMQ_CREDENTIALS,
      ...QUICK_SQS,
      ...config,
      namespace: ns,
    });
  const others: string[] = [];
  return Promise.resolve({
    transport: make(namespace),
    peer: () => Promise.resolve(make(namespace)),
    otherNamespace: () => {
      const other = `o${randomUUID().slice(0, 8)}`;
      others.push(other);
      return Promise.resolve(make(other));
    },
    foreign: foreignProducer(endpoint, namespace, config.fifo ?? false),
    async cleanup() {
      const client = sqsClient(endpoint);
      try {
        for (const ns of [namespace, ...others]) await deleteQueues(client, `${ns}_`);
      } finally {
        client.destroy();
      }
    },
  });
}
