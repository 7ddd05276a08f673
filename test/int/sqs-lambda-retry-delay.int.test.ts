import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
  type Message,
} from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Logger } from 'oncemq';
import { lambdaRecord } from '../../bench/lambda-event-source.js';
import { createQueue, deleteQueue, sqsClient } from '../../bench/sqs-queues.js';
import { SQS_LAMBDA_MAX_RETRY_SECONDS, SqsLambdaRetryDelays } from '../support/internal.js';
import { findSqs } from '../support/sqs-lambda.js';

const sqs = await findSqs();

interface KeptWarning {
  readonly message: string;
  readonly fields: Record<string, unknown> | undefined;
}

/** A logger that keeps its warnings. */
function keepingLogger(): Logger & { readonly warnings: KeptWarning[] } {
  const warnings: KeptWarning[] = [];
  const none = (): void => undefined;
  return {
    warnings,
    debug: none,
    info: none,
    error: none,
    warn: (message, fields) => warnings.push({ message, fields }),
  };
}

/** The VisibilityTimeout of every entry of every ChangeMessageVisibilityBatch the client sends. */
function recordVisibilities(client: SQSClient): number[] {
  const seen: number[] = [];
  client.middlewareStack.add(
    (next) => async (args) => {
      const input = args.input as { Entries?: { VisibilityTimeout?: number }[] };
      for (const entry of input.Entries ?? []) {
        if (entry.VisibilityTimeout !== undefined) seen.push(entry.VisibilityTimeout);
      }
      return next(args);
    },
    { step: 'initialize', name: 'recordVisibilities' },
  );
  return seen;
}

describe.skipIf(!sqs.available)("a Lambda retry's delay (ElasticMQ)", () => {
  let client: SQSClient;
  let queueUrl: string;
  let queueArn: string;

  beforeEach(async () => {
    client = sqsClient(sqs.url);
    queueUrl = await createQueue(client, 'oncemq-retry-delay');
    const attributes = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
    );
    queueArn = attributes.Attributes?.QueueArn ?? '';
  });

  afterEach(async () => {
    await deleteQueue(client, queueUrl);
    client.destroy();
  });

  async function received(count: number): Promise<Message[]> {
    for (let n = 0; n < count; n++) {
      await client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: `{"n":${n}}` }));
    }
    const messages: Message[] = [];
    while (messages.length < count) {
      const answer = await client.send(
        new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      messages.push(...(answer.Messages ?? []));
    }
    return messages;
  }

  it('caps a delay past SQS’s 12 hours at 11 h 40 min, and sends a shorter one as it is, in whole seconds', async () => {
    const [long, short] = await received(2);
    const sent = recordVisibilities(client);
    const logger = keepingLogger();
    const delays = new SqsLambdaRetryDelays(() => client, logger);
    await delays.delay([
      { record: lambdaRecord(long as Message, queueArn), delayMs: 24 * 3600_000 },
      { record: lambdaRecord(short as Message, queueArn), delayMs: 1_500 },
    ]);
    expect(SQS_LAMBDA_MAX_RETRY_SECONDS).toBe(11 * 3600 + 40 * 60);
    expect(sent).toEqual([SQS_LAMBDA_MAX_RETRY_SECONDS, 2]);
    expect(logger.warnings).toEqual([]);
  });

  it('logs a change SQS refused for one record and still changes the others', async () => {
    const [good] = await received(1);
    const logger = keepingLogger();
    const delays = new SqsLambdaRetryDelays(() => client, logger);
    const refused = {
      ...lambdaRecord(good as Message, queueArn),
      messageId: 'refused',
      receiptHandle: 'no-such-handle',
    };
    await delays.delay([
      { record: lambdaRecord(good as Message, queueArn), delayMs: 30_000 },
      { record: refused, delayMs: 30_000 },
    ]);
    expect(logger.warnings.map((w) => w.fields?.messageId)).toEqual(['refused']);
    // the good record was hidden: a receive now finds nothing
    const answer = await client.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    expect(answer.Messages ?? []).toEqual([]);
  });

  it('logs every record of a change whose call failed, and does not throw: they come back after the queue’s timeout', async () => {
    const [one, two] = await received(2);
    const logger = keepingLogger();
    const unreachable = new SQSClient({
      endpoint: 'http://127.0.0.1:9',
      region: 'elasticmq',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
      maxAttempts: 1,
    });
    const delays = new SqsLambdaRetryDelays(() => unreachable, logger);
    await delays.delay([
      { record: lambdaRecord(one as Message, queueArn), delayMs: 30_000 },
      { record: lambdaRecord(two as Message, queueArn), delayMs: 30_000 },
    ]);
    unreachable.destroy();
    expect(logger.warnings.map((w) => w.fields?.messageId).sort()).toEqual(
      [one?.MessageId, two?.MessageId].sort(),
    );
    expect(logger.warnings[0]?.message).toMatch(/comes back after the queue's visibility timeout/);
  });
});
