// sqsHandler's dead letters in the transport's own dead-letter queue, read by `oncemq dlq --transport sqs`.
import { randomUUID } from 'node:crypto';
import { ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqsTransport } from 'oncemq/sqs';
import { LambdaEventSource } from '../../bench/lambda-event-source.js';
import { EffectsDatabase, oncemqRuntime } from '../../bench/sqs-lambda-runtimes.js';
import { createQueue, deleteQueue, sendMessages } from '../../bench/sqs-queues.js';
import { findElasticMQ } from '../support/brokers.js';
import { runDlq } from '../support/dlq-cli.js';
import { outcomeFor, waitFor } from '../support/internal.js';
import { findPostgres } from '../support/postgres.js';
import { deleteQueues, ELASTICMQ_CREDENTIALS, QUICK_SQS, sqsClient } from '../support/sqs.js';

const sqs = await findElasticMQ();
const postgres = await findPostgres();

interface Listed {
  id: string;
  topic: string;
  reason: string;
  error: string | null;
  deliveryCount: number;
  body: string;
}

describe.skipIf(!sqs.available || !postgres.available)(
  "sqsHandler({ deadLetter: transport.deadLetters }): the transport's dead-letter queue",
  () => {
    let client: SQSClient;
    let namespace: string;
    let transport: SqsTransport;
    let db: EffectsDatabase;
    let lambdaQueue: string;
    const sources: LambdaEventSource[] = [];

    beforeEach(async () => {
      client = sqsClient(sqs.url);
      namespace = `ld${randomUUID().slice(0, 8)}`;
      transport = new SqsTransport({
        endpoint: sqs.url,
        credentials: ELASTICMQ_CREDENTIALS,
        namespace,
        ...QUICK_SQS,
      });
      db = new EffectsDatabase(postgres.url);
      await db.init();
      lambdaQueue = await createQueue(client, `${namespace}-lambda`);
    });

    afterEach(async () => {
      await Promise.all(sources.splice(0).map((source) => source.stop()));
      await transport.close();
      await deleteQueue(client, lambdaQueue);
      await deleteQueues(client, `${namespace}_`);
      await db.close();
      client.destroy();
    });

    it('stores a Lambda dead letter beside the transport’s, with reason, error and attempt; lists both; replays it to the Lambda’s queue', async () => {
      // The transport's own consumer dead-letters one message of group points.
      await transport.publish({ topic: 'payments', key: 'evt-1', body: { n: 1 } });
      const subscription = await transport.subscribe('points', ['payments'], (envelope) =>
        Promise.resolve(outcomeFor(envelope, 'dead-letter', 0)),
      );
      await waitFor(
        async () => (await transport.deadLetters.list({ group: 'points' })).length === 1,
        'the transport’s dead letter',
        15_000,
      );
      await subscription.close();

      // The Lambda of group points dead-letters a malformed record into the same queue.
      const source = new LambdaEventSource({
        client,
        queueUrl: lambdaQueue,
        timeoutMs: 10_000,
        visibilitySeconds: 2,
        runtime: oncemqRuntime({ db, handler: { deadLetter: transport.deadLetters } }),
      });
      sources.push(source);
      await sendMessages(client, lambdaQueue, [{ body: 'not json' }]);
      let invocation = await source.invokeOnce();
      while (invocation === undefined) invocation = await source.invokeOnce();
      expect(invocation.answer).toEqual({ batchItemFailures: [] });
      expect(invocation.deleted).toHaveLength(1);

      const url = `${sqs.url}?namespace=${namespace}`;
      const list = await runDlq('list', '--transport', 'sqs', '--url', url, '--group', 'points', '--json');
      expect(list.code).toBe(0);
      const letters = JSON.parse(list.out) as Listed[];
      const lambdaName = lambdaQueue.slice(lambdaQueue.lastIndexOf('/') + 1);
      expect(letters.map((letter) => [letter.topic, letter.reason]).sort()).toEqual(
        [
          ['payments', 'permanent-error'],
          [lambdaName, 'malformed'],
        ].sort(),
      );
      const fromLambda = letters.find((letter) => letter.topic === lambdaName) as Listed;
      expect(fromLambda).toMatchObject({ deliveryCount: 1, body: 'not json' });
      expect(fromLambda.error).toMatch(/JSON/);

      const replay = await runDlq(
        'replay',
        '--transport',
        'sqs',
        '--url',
        url,
        '--group',
        'points',
        fromLambda.id,
      );
      expect(replay).toMatchObject({ code: 0, out: 'replayed 1 of 1' });
      const back = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: lambdaQueue,
          WaitTimeSeconds: 2,
          MessageAttributeNames: ['All'],
        }),
      );
      expect(back.Messages?.map((message) => message.Body)).toEqual(['not json']);
      const attributes = Object.keys(back.Messages?.[0]?.MessageAttributes ?? {});
      expect(attributes.filter((name) => name.startsWith('oncemq-dead'))).toEqual([]);
      expect((await transport.deadLetters.list({ group: 'points' })).map((letter) => letter.topic)).toEqual([
        'payments',
      ]);
    }, 60_000);
  },
);
