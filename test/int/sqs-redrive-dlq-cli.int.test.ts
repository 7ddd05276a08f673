// `oncemq dlq --transport sqs --queue Q`: a dead-letter queue that SQS's redrive policy fills, on ElasticMQ.
import { randomUUID } from 'node:crypto';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findElasticMQ } from '../support/brokers.js';
import { runDlq } from '../support/dlq-cli.js';
import { deleteQueues, sqsClient } from '../support/sqs.js';

const service = await findElasticMQ();

describe.skipIf(!service.available)('oncemq dlq --transport sqs --queue (a redrive policy’s queue)', () => {
  let client: SQSClient;
  let prefix: string;
  let source: string;
  let dead: string;

  beforeEach(async () => {
    client = sqsClient(service.url);
    prefix = `rd${randomUUID().slice(0, 8)}`;
    dead = `${prefix}-dlq`;
    const { QueueUrl: deadUrl } = await client.send(new CreateQueueCommand({ QueueName: dead }));
    const { Attributes } = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: deadUrl, AttributeNames: ['QueueArn'] }),
    );
    const redrive = JSON.stringify({ deadLetterTargetArn: Attributes?.QueueArn, maxReceiveCount: 1 });
    source = (
      await client.send(
        new CreateQueueCommand({ QueueName: `${prefix}-orders`, Attributes: { RedrivePolicy: redrive } }),
      )
    ).QueueUrl as string;
  });

  afterEach(async () => {
    await deleteQueues(client, prefix);
    client.destroy();
  });

  /** Sends a message to the source queue and receives it until the redrive policy moves it. */
  async function redriven(body: string, key: string): Promise<void> {
    await client.send(
      new SendMessageCommand({
        QueueUrl: source,
        MessageBody: body,
        MessageAttributes: { 'oncemq-key': { DataType: 'String', StringValue: key } },
      }),
    );
    for (let receives = 0; receives < 3; receives++) {
      await client.send(
        new ReceiveMessageCommand({ QueueUrl: source, VisibilityTimeout: 1, WaitTimeSeconds: 1 }),
      );
      await new Promise((resolve) => setTimeout(resolve, 1100));
    }
  }

  it('lists what the redrive policy moved, with its reason and source, and replays it to the source queue', async () => {
    await redriven('{"id":1}', 'evt-1');
    await redriven('{"id":2}', 'evt-2');
    const list = await runDlq('list', '--transport', 'sqs', '--url', service.url, '--queue', dead, '--json');
    expect(list.code).toBe(0);
    const letters = JSON.parse(list.out) as {
      id: string;
      key: string;
      reason: string;
      topic: string;
      body: string;
    }[];
    expect(letters.map((letter) => [letter.key, letter.body]).sort()).toEqual([
      ['evt-1', '{"id":1}'],
      ['evt-2', '{"id":2}'],
    ]);
    for (const letter of letters) {
      expect(letter).toMatchObject({
        reason: 'redrive: received more than maxReceiveCount',
        topic: `${prefix}-orders`,
      });
    }

    const first = letters.find((letter) => letter.key === 'evt-1');
    const replay = await runDlq(
      'replay',
      '--transport',
      'sqs',
      '--url',
      service.url,
      '--queue',
      dead,
      first?.id ?? '',
    );
    expect(replay).toMatchObject({ code: 0, out: 'replayed 1 of 1' });
    const back = await client.send(
      new ReceiveMessageCommand({ QueueUrl: source, WaitTimeSeconds: 2, MessageAttributeNames: ['All'] }),
    );
    expect(
      back.Messages?.map((message) => [message.Body, message.MessageAttributes?.['oncemq-key']?.StringValue]),
    ).toEqual([['{"id":1}', 'evt-1']]);
    const rest = await runDlq('list', '--transport', 'sqs', '--url', service.url, '--queue', dead, '--json');
    expect((JSON.parse(rest.out) as { key: string }[]).map((letter) => letter.key)).toEqual(['evt-2']);

    const purge = await runDlq('purge', '--transport', 'sqs', '--url', service.url, '--queue', dead, '--all');
    expect(purge).toMatchObject({ code: 0, out: 'purged 1 of 1' });
  }, 60_000);

  it('says a queue that is not there is missing, and creates nothing', async () => {
    const missing = `${prefix}-nothere`;
    await expect(
      runDlq('list', '--transport', 'sqs', '--url', service.url, '--queue', missing),
    ).rejects.toThrow(`there is no queue ${missing}`);
    await expect(client.send(new GetQueueUrlCommand({ QueueName: missing }))).rejects.toThrow();
  });

  it('refuses --queue on another transport', async () => {
    await expect(runDlq('list', '--transport', 'local', '--queue', dead)).rejects.toThrow(
      '--queue is for --transport sqs only',
    );
  });
});
