/**
 * The `oncemq:sqs` row of the `sqs` bench: oncemq's own SQS transport (`subscribe`, not Lambda)
 * driving a transactional pipeline on the PostgreSQL ledger, the same business write as the other
 * rows. Its messages are sent straight to the group's queue with `SendMessageBatch`, as every row's
 * are, so that only the consuming side differs. A message counts once its delete is confirmed (the
 * client's `DeleteMessageBatch` answers are counted), as the raw row counts after its delete.
 */
import { randomBytes } from 'node:crypto';
import {
  GetQueueUrlCommand,
  type DeleteMessageBatchCommandOutput,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { createPipeline, type Pipeline } from '../src/consumer/pipeline.js';
import type { PgClientLike } from '../src/ledger/postgres/postgres-client.js';
import { PostgresLedger } from '../src/ledger/postgres/postgres-ledger.js';
import { SqsNames } from '../src/transport/sqs/sqs-names.js';
import { SqsTransport } from '../src/transport/sqs/sqs-transport.js';
import type { SubscribeOptions } from '../src/transport/transport.js';
import type { DrainContender, Drainer, DrainRun } from './drain.js';
import type { EffectsDatabase, PaymentEvent } from './sqs-lambda-runtimes.js';
import { deleteQueue, sqsClient } from './sqs-queues.js';

const TOPIC = 'payments';
const GROUP = 'points';

/** The URL of queue `name`, or `undefined` when it is not there. */
async function queueUrlOf(client: SQSClient, name: string): Promise<string | undefined> {
  return client.send(new GetQueueUrlCommand({ QueueName: name })).then(
    (answer) => answer.QueueUrl,
    () => undefined,
  );
}

/** What the row's drains share: the client, whose confirmed deletes the current drain counts. */
class DeleteCounter {
  run: DrainRun | undefined;

  constructor(client: SQSClient) {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const result = await next(args);
        if (context.commandName === 'DeleteMessageBatchCommand') {
          const output = result.output as DeleteMessageBatchCommandOutput;
          const done = output.Successful?.length ?? 0;
          if (done > 0) this.run?.progress.tick(done);
        }
        return result;
      },
      { step: 'initialize', name: 'oncemqBenchDeleteCounter' },
    );
  }
}

export interface SqsTransportRowConfig {
  readonly db: EffectsDatabase;
  readonly sqsUrl: string;
  /** Receives of 10 in flight at once (the raw row's loops). */
  readonly pollers: number;
  /** Sends the drain's messages to a queue (the same sender as every row). */
  readonly publish: (client: SQSClient, queueUrl: string, run: DrainRun) => Promise<void>;
}

/**
 * `oncemq:sqs`: `subscribe(group, [topic], pipeline, { batchSize: 10, concurrency: 10 × pollers })`,
 * so that as many batches of 10 are in flight as the raw row has loops.
 */
export function sqsTransportRow(config: SqsTransportRowConfig): DrainContender {
  const { db, pollers } = config;
  return {
    name: 'oncemq:sqs',
    concurrency: pollers,
    baseline: 'raw:sqs',
    note: 'batch 10',
    open: async (): Promise<Drainer> => {
      const client = sqsClient(config.sqsUrl);
      const counter = new DeleteCounter(client);
      const namespace = `bench${randomBytes(3).toString('hex')}`;
      const transport = new SqsTransport({ client, namespace, longPoll: '1s' });
      const name = `oncemq-sqs-${process.pid}`;
      const pool = db.pool(name, Math.max(2, pollers));
      const pipeline: Pipeline = createPipeline<PgClientLike, PaymentEvent>({
        ledger: new PostgresLedger({ pool, schema: db.schema }),
        group: GROUP,
        key: { jsonPath: 'eventId' },
        lease: '5s',
        handler: async (event, ctx) => {
          await ctx.tx.query(db.insert, [event.eventId, event.userId]);
        },
        telemetry: false,
      });
      const options: SubscribeOptions = { batchSize: 10, concurrency: 10 * pollers, from: 'now' };
      // The group's queue exists before anything is sent to it.
      await (await transport.subscribe(GROUP, [TOPIC], pipeline, options)).close();
      const names = new SqsNames(namespace, false);
      const queueUrl = await queueUrlOf(client, names.group(TOPIC, GROUP));
      if (queueUrl === undefined) throw new Error('oncemq:sqs: the group queue was not created');
      return {
        publish: (run) => config.publish(client, queueUrl, run),
        consume: async (run) => {
          counter.run = run;
          const subscription = await transport.subscribe(GROUP, [TOPIC], pipeline, options);
          return { stop: () => subscription.close() };
        },
        close: async () => {
          pipeline.close();
          await transport.close();
          for (const queue of [names.group(TOPIC, GROUP), names.deadLetters(GROUP), names.log(TOPIC)]) {
            const url = await queueUrlOf(client, queue);
            if (url !== undefined) await deleteQueue(client, url);
          }
          await pool.end();
          client.destroy();
        },
      };
    },
  };
}
