/**
 * SQS → handler → PostgreSQL write, side by side (docs/bench.md, docs/transports/lambda.md):
 * - `raw:sqs` — the SDK by hand: receive 10, claim each event id and write its effect in one
 *   transaction per received batch, delete the batch;
 * - `oncemq:sqs` — oncemq's SQS transport (`subscribe`) driving a pipeline on the PostgreSQL ledger,
 *   batches of 10 (bench/sqs-transport-row.ts);
 * - `oncemq:sqs:lambda` — `sqsHandler` over a pipeline on the PostgreSQL ledger, under the local
 *   Lambda event source (bench/lambda-event-source.ts);
 * - `peer:powertools:sqs` — Powertools' `BatchProcessor` + `makeIdempotent` with its Redis (cache)
 *   persistence, under the same event source.
 * Same queue settings, batches of 10, `pollers` event sources (or raw loops) per row, the same business
 * write (one `effects` row per applied message). Then the fault run: some records' invocations stall
 * between the business write and the completion record, time out and are killed; the effect checker
 * counts effects per key once every message is deleted.
 *
 *   npm run bench -- sqs [--json] [--flag messages=2000] [--flag repetitions=3] [--flag warmup=500]
 *     [--flag pollers=2] [--flag faultKeys=20] [--flag fault=0]
 */
import { randomBytes } from 'node:crypto';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { resolveServiceUrl } from '../src/cli/connection.js';
import { measureDrains, type DrainContender, type DrainRun, type Drainer } from './drain.js';
import { wholeFlag } from './flags.js';
import type { BenchResult, Suite } from './harness.js';
import { LambdaEventSource, type LambdaRuntime } from './lambda-event-source.js';
import {
  EffectsDatabase,
  oncemqRuntime,
  powertoolsRuntime,
  type AfterWrite,
  type PaymentEvent,
} from './sqs-lambda-runtimes.js';
import {
  createQueue,
  DEFAULT_SQS_URL,
  deleteQueue,
  queueDepth,
  sendMessages,
  sqsClient,
} from './sqs-queues.js';
import { sqsTransportRow } from './sqs-transport-row.js';

const VISIBILITY_SECONDS = 30;
const TIMEOUT_MS = 30_000;

function event(tag: string, n: number): PaymentEvent {
  return { eventId: `${tag}-${n}`, userId: `user-${n % 1000}` };
}

async function publish(client: SQSClient, queueUrl: string, run: DrainRun): Promise<void> {
  const messages = Array.from({ length: run.count }, (_, n) => ({ body: JSON.stringify(event(run.tag, n)) }));
  await sendMessages(client, queueUrl, messages);
}

/** A row whose queue is consumed by `pollers` loops made by `loop`, each told to count what it deletes. */
function row(
  name: string,
  pollers: number,
  sqsUrl: string,
  loop: (client: SQSClient, queueUrl: string, done: (n: number) => void) => { stop(): Promise<void> },
  extra: Partial<DrainContender> = {},
): DrainContender {
  return {
    name,
    concurrency: pollers,
    baseline: 'raw:sqs',
    note: 'batch 10',
    ...extra,
    open: async (): Promise<Drainer> => {
      const client = sqsClient(sqsUrl);
      const queueUrl = await createQueue(client, `oncemq-bench-${name.replace(/[^A-Za-z0-9]/g, '-')}`);
      return {
        publish: (run) => publish(client, queueUrl, run),
        consume: (run) => {
          const loops = Array.from({ length: pollers }, () =>
            loop(client, queueUrl, (n) => {
              run.progress.tick(n);
            }),
          );
          return Promise.resolve({
            stop: async () => {
              await Promise.all(loops.map((l) => l.stop()));
            },
          });
        },
        close: async () => {
          await deleteQueue(client, queueUrl);
          client.destroy();
        },
      };
    },
  };
}

/** The SDK by hand: receive, claim + write in one transaction, delete. */
function rawLoop(db: EffectsDatabase) {
  const pool = db.pool('raw-sqs', 2);
  const claim = `INSERT INTO "${db.schema}".raw_ledger (consumer_group, msg_key, status, attempt, broker_id, topic, created_at, updated_at)
    VALUES ('points', $1, 'SUCCESS', 1, $2, 'payments', now(), now()) ON CONFLICT (consumer_group, msg_key) DO NOTHING`;
  return (client: SQSClient, queueUrl: string, done: (n: number) => void) => {
    let stopping = false;
    const running = (async () => {
      while (!stopping) {
        const { Messages: messages = [] } = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            VisibilityTimeout: VISIBILITY_SECONDS,
          }),
        );
        if (messages.length === 0) continue;
        const connection = await pool.connect();
        try {
          await connection.query('BEGIN');
          for (const message of messages) {
            const payment = JSON.parse(message.Body ?? '') as PaymentEvent;
            const { rowCount } = await connection.query(claim, [payment.eventId, message.MessageId]);
            if (rowCount === 1) await connection.query(db.insert, [payment.eventId, payment.userId]);
          }
          await connection.query('COMMIT');
        } catch (error) {
          await connection.query('ROLLBACK').catch(() => undefined);
          throw error;
        } finally {
          connection.release();
        }
        await client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: messages.map((message, i) => ({ Id: String(i), ReceiptHandle: message.ReceiptHandle })),
          }),
        );
        done(messages.length);
      }
    })();
    return {
      stop: async () => {
        stopping = true;
        await running;
      },
    };
  };
}

/** A Lambda row: an event source per poller, each with its own execution environment. */
function lambdaLoop(runtime: () => Promise<LambdaRuntime>) {
  return (client: SQSClient, queueUrl: string, done: (n: number) => void) => {
    const source = new LambdaEventSource({
      client,
      queueUrl,
      timeoutMs: TIMEOUT_MS,
      visibilitySeconds: VISIBILITY_SECONDS,
      waitSeconds: 1,
      runtime,
      onInvocation: (invocation) => {
        done(invocation.deleted.length);
      },
    });
    source.start();
    return { stop: () => source.stop() };
  };
}

/**
 * The fault run of one row: every `every`-th key's first run stalls after its business write, before
 * its completion record (oncemq: before the commit); the invocation times out and its environment is
 * killed; the event source goes on until the queue is empty. Answers the effect checker's counts.
 */
async function faultRun(
  name: string,
  sqsUrl: string,
  db: EffectsDatabase,
  keys: number,
  runtime: (afterWrite: AfterWrite) => () => Promise<LambdaRuntime>,
): Promise<BenchResult> {
  const client = sqsClient(sqsUrl);
  const queueUrl = await createQueue(client, 'oncemq-bench-fault');
  const tag = `fault-${name.replace(/[^A-Za-z0-9]/g, '_')}-${randomBytes(3).toString('hex')}`;
  const stalled = new Set<string>();
  const afterWrite: AfterWrite = (payment) => {
    const n = Number(payment.eventId.slice(tag.length + 1));
    if (n % 5 !== 2 || stalled.has(payment.eventId)) return;
    stalled.add(payment.eventId);
    return new Promise<void>(() => undefined); // the environment stalls here until the timeout kills it
  };
  const source = new LambdaEventSource({
    client,
    queueUrl,
    timeoutMs: 2000,
    visibilitySeconds: 3,
    waitSeconds: 1,
    runtime: runtime(afterWrite),
  });
  const started = performance.now();
  try {
    await sendMessages(
      client,
      queueUrl,
      Array.from({ length: keys }, (_, n) => ({ body: JSON.stringify(event(tag, n)) })),
    );
    const until = Date.now() + 120_000;
    for (;;) {
      await source.invokeOnce();
      const depth = await queueDepth(client, queueUrl);
      if (depth.visible + depth.inFlight === 0) break;
      if (Date.now() > until) throw new Error(`${name}: the fault run did not drain in 120 s`);
    }
    const counts = await db.counts(tag);
    const twice = [...counts.values()].filter((n) => n > 1).length;
    const missing = keys - counts.size;
    return {
      name: `fault:${name}`,
      concurrency: 1,
      messagesPerSecond: Math.round(keys / ((performance.now() - started) / 1000)),
      messages: keys,
      note: `keys ${keys}, stalled ${stalled.size}, applied twice ${twice}, missing ${missing}, timeouts ${source.counts.timeouts}`,
    };
  } finally {
    await source.stop();
    await deleteQueue(client, queueUrl);
    client.destroy();
  }
}

export const suite: Suite = {
  name: 'sqs',
  description:
    "SQS → handler → PostgreSQL: the raw SDK, oncemq's SQS transport, oncemq under a local Lambda event source, Powertools batch + idempotency (Redis); then a fault run",
  async run({ flags }) {
    const messages = wholeFlag(flags, 'messages', 2000);
    const repetitions = wholeFlag(flags, 'repetitions', 3);
    const warmup = wholeFlag(flags, 'warmup', Math.min(messages, 500), 0);
    const pollers = wholeFlag(flags, 'pollers', 2);
    const faultKeys = wholeFlag(flags, 'faultKeys', 20);
    const fault = wholeFlag(flags, 'fault', 1, 0) > 0;
    const sqsUrl = process.env.ONCEMQ_SQS_URL ?? DEFAULT_SQS_URL;
    const redisUrl = resolveServiceUrl('redis').url;
    const db = new EffectsDatabase(resolveServiceUrl('postgres').url);
    const runId = randomBytes(3).toString('hex');
    try {
      await db.init();
      const keyPrefix = `oncemq-bench-${runId}`;
      const rows = [
        row('raw:sqs', pollers, sqsUrl, rawLoop(db)),
        sqsTransportRow({ db, sqsUrl, pollers, publish }),
        row('oncemq:sqs:lambda', pollers, sqsUrl, lambdaLoop(oncemqRuntime({ db }))),
        row(
          'peer:powertools:sqs',
          pollers,
          sqsUrl,
          lambdaLoop(powertoolsRuntime({ db, redisUrl, keyPrefix })),
        ),
      ];
      const drained = await measureDrains(rows, {
        messages,
        repetitions,
        effects: () => db.total(),
        runId: `sqs-${runId}`,
        warmup,
      });
      // The Lambda rows compared with each other too, at the same batch size and pollers.
      const results: BenchResult[] = drained.map((result) =>
        result.name === 'oncemq:sqs:lambda' ? { ...result, peer: 'peer:powertools:sqs' } : result,
      );
      if (fault) {
        results.push(
          await faultRun('oncemq:sqs:lambda', sqsUrl, db, faultKeys, (afterWrite) =>
            oncemqRuntime({ db, lease: '1s', afterWrite }),
          ),
          await faultRun('peer:powertools:sqs', sqsUrl, db, faultKeys, (afterWrite) =>
            powertoolsRuntime({ db, redisUrl, keyPrefix: `${keyPrefix}-fault`, afterWrite }),
          ),
        );
      }
      return results;
    } finally {
      await db.close();
    }
  },
};
