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
import { TcpProxy } from 'oncemq/testing';
import { SQS_MAX_MESSAGE_BYTES, SqsNames } from './internal.js';

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

/** An SQS transport under test, with the proxy its calls go through and its namespace. */
export interface SqsUnderTest extends TransportUnderTest {
  readonly transport: SqsTransport;
  readonly proxy: TcpProxy;
  readonly namespace: string;
}

/**
 * An SQS transport on ElasticMQ for one conformance case, in a namespace of its own (its queues deleted
 * after). Every transport it makes reaches ElasticMQ through one TCP proxy, so `dropConnections` cuts
 * every HTTP connection of the transport, its peers and their subscriptions (long polls in flight
 * included); the SDK sends the calls it had on them again on new connections.
 */
export async function sqsUnderTest(endpoint: string, config: SqsTransportConfig = {}): Promise<SqsUnderTest> {
  const target = new URL(endpoint);
  const proxy = await TcpProxy.start({ targetHost: target.hostname, targetPort: Number(target.port || 80) });
  const proxied = `http://127.0.0.1:${proxy.port}`;
  const namespace = config.namespace ?? `t${randomUUID().slice(0, 8)}`;
  const make = (ns: string): SqsTransport =>
    new SqsTransport({
      endpoint: proxied,
      credentials: ELASTICMQ_CREDENTIALS,
      ...QUICK_SQS,
      ...config,
      namespace: ns,
    });
  const others: string[] = [];
  return {
    proxy,
    namespace,
    transport: make(namespace),
    peer: () => Promise.resolve(make(namespace)),
    otherNamespace: () => {
      const other = `o${randomUUID().slice(0, 8)}`;
      others.push(other);
      return Promise.resolve(make(other));
    },
    foreign: foreignProducer(endpoint, namespace, config.fifo ?? false),
    dropConnections: () => {
      proxy.dropConnections();
      return Promise.resolve();
    },
    acksOutliveCuts:
      'SQS: a delete is an HTTP request of its own, sent again on a new connection after a cut, and a receipt handle is not bound to a connection (test/int/sqs-cuts.int.test.ts loses the delete to an outage instead)',
    // SQS's limit, body and attributes together: the transport holds publishes and dead letters to it
    // (ElasticMQ's `sqs-limits = strict` counts the body only).
    maxMessageBytes: SQS_MAX_MESSAGE_BYTES,
    async cleanup() {
      await proxy.close();
      const client = sqsClient(endpoint);
      try {
        for (const ns of [namespace, ...others]) await deleteQueues(client, `${ns}_`);
      } finally {
        client.destroy();
      }
    },
  };
}
