/** SQS queues for the `sqs` bench and the Lambda tests, on ElasticMQ (or any SQS endpoint). */
import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SQSClient,
  type MessageAttributeValue,
} from '@aws-sdk/client-sqs';

/** ElasticMQ's address unless `ONCEMQ_SQS_URL` says otherwise. */
export const DEFAULT_SQS_URL = 'http://127.0.0.1:9324';

/** An SDK client for `url`; ElasticMQ takes any credentials. */
export function sqsClient(url: string): SQSClient {
  return new SQSClient({
    endpoint: url,
    region: 'elasticmq',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
}

/** Creates a queue with a unique name starting with `prefix`; answers its URL. */
export async function createQueue(
  client: SQSClient,
  prefix: string,
  attributes: Record<string, string> = {},
): Promise<string> {
  const fifo = attributes.FifoQueue === 'true';
  const name = `${prefix}-${randomBytes(4).toString('hex')}${fifo ? '.fifo' : ''}`;
  const answer = await client.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  if (answer.QueueUrl === undefined) throw new Error(`CreateQueue ${name} answered no URL`);
  return answer.QueueUrl;
}

export async function deleteQueue(client: SQSClient, url: string): Promise<void> {
  await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
}

/** Messages waiting, and in flight (received, not deleted, invisible). */
export async function queueDepth(
  client: SQSClient,
  url: string,
): Promise<{ visible: number; inFlight: number }> {
  const answer = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return {
    visible: Number(answer.Attributes?.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(answer.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0),
  };
}

/** A message to send: its body as text, and string attributes. */
export interface QueueMessage {
  readonly body: string;
  readonly attributes?: Readonly<Record<string, string>>;
}

/** Sends the messages in batches of 10 (`SendMessageBatch`), `window` batches at a time. */
export async function sendMessages(
  client: SQSClient,
  url: string,
  messages: readonly QueueMessage[],
  window = 8,
): Promise<void> {
  const batches: QueueMessage[][] = [];
  for (let i = 0; i < messages.length; i += 10) batches.push(messages.slice(i, i + 10));
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < batches.length) {
      const batch = batches[next++] as QueueMessage[];
      const answer = await client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: batch.map((message, i) => ({
            Id: String(i),
            MessageBody: message.body,
            MessageAttributes: Object.fromEntries(
              Object.entries(message.attributes ?? {}).map(
                ([name, value]): [string, MessageAttributeValue] => [
                  name,
                  { DataType: 'String', StringValue: value },
                ],
              ),
            ),
          })),
        }),
      );
      if ((answer.Failed ?? []).length > 0)
        throw new Error(`SendMessageBatch failed: ${JSON.stringify(answer.Failed)}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(window, batches.length) }, worker));
}
