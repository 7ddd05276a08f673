import { randomBytes } from 'node:crypto';
import middy from '@middy/core';
import { ReceiveMessageCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Outcome } from 'oncemq';
import {
  LambdaEventSource,
  type Invocation,
  type LambdaEventSourceConfig,
} from '../../bench/lambda-event-source.js';
import {
  EffectsDatabase,
  oncemqRuntime,
  type OncemqRuntimeConfig,
  type PaymentEvent,
} from '../../bench/sqs-lambda-runtimes.js';
import { createQueue, deleteQueue, sendMessages, sqsClient } from '../../bench/sqs-queues.js';
import { findPostgres } from '../support/postgres.js';
import { findSqs } from '../support/sqs-lambda.js';

const sqs = await findSqs();
const postgres = await findPostgres();

const VISIBILITY_SECONDS = 2;

function events(tag: string, count: number): PaymentEvent[] {
  return Array.from({ length: count }, (_, n) => ({ eventId: `${tag}-${n}`, userId: `user-${n % 3}` }));
}

/** Invokes until an invocation happens (the batch is visible again), at most `withinMs`. */
async function nextInvocation(source: LambdaEventSource, withinMs = 10_000): Promise<Invocation> {
  const until = Date.now() + withinMs;
  while (Date.now() < until) {
    const invocation = await source.invokeOnce();
    if (invocation !== undefined) return invocation;
  }
  throw new Error(`no message came back within ${withinMs}ms`);
}

function ids(invocation: Invocation, wanted: (event: PaymentEvent) => boolean): string[] {
  return invocation.records
    .filter((record) => wanted(JSON.parse(record.body) as PaymentEvent))
    .map((record) => record.messageId);
}

describe.skipIf(!sqs.available || !postgres.available)(
  'sqsHandler under a local SQS event source (ElasticMQ, PostgreSQL ledger)',
  () => {
    let client: SQSClient;
    let queueUrl: string;
    let db: EffectsDatabase;
    let tag: string;
    const sources: LambdaEventSource[] = [];
    const outcomes: Outcome[] = [];

    beforeEach(async () => {
      client = sqsClient(sqs.url);
      queueUrl = await createQueue(client, 'oncemq-lambda');
      db = new EffectsDatabase(postgres.url);
      await db.init();
      tag = `e${randomBytes(3).toString('hex')}`;
      outcomes.length = 0;
    });

    afterEach(async () => {
      await Promise.all(sources.splice(0).map((source) => source.stop()));
      await deleteQueue(client, queueUrl);
      await db.close();
      client.destroy();
    });

    function eventSource(
      runtime: Omit<OncemqRuntimeConfig, 'db'> = {},
      source: Partial<LambdaEventSourceConfig> = {},
    ): LambdaEventSource {
      const created = new LambdaEventSource({
        client,
        queueUrl,
        timeoutMs: 10_000,
        visibilitySeconds: VISIBILITY_SECONDS,
        waitSeconds: 1,
        runtime: oncemqRuntime({
          db,
          onOutcome: (outcome) => outcomes.push(outcome),
          ...runtime,
          // The retry delays' visibility changes go to the test's server.
          handler: { client, ...runtime.handler },
        }),
        ...source,
      });
      sources.push(created);
      return created;
    }

    async function publish(list: readonly PaymentEvent[]): Promise<void> {
      await sendMessages(
        client,
        queueUrl,
        list.map((event) => ({ body: JSON.stringify(event) })),
      );
    }

    it('reports a failed record in batchItemFailures; it alone comes back, with ApproximateReceiveCount 2, and is applied once', async () => {
      let failing = true; // in the first invocation only (the batch and its one-by-one fallback)
      const source = eventSource({
        retry: { delays: ['1s'] },
        afterWrite: (event) => {
          if (failing && event.eventId === `${tag}-2`) throw new Error('downstream refused');
        },
      });
      await publish(events(tag, 5));
      const first = await nextInvocation(source);
      expect(first.records).toHaveLength(5);
      expect(first.ended).toBe('answered');
      const failed = ids(first, (event) => event.eventId === `${tag}-2`);
      expect(first.answer).toEqual({ batchItemFailures: failed.map((id) => ({ itemIdentifier: id })) });
      expect(first.deleted).toHaveLength(4);
      failing = false;

      const second = await nextInvocation(source);
      expect(second.records.map((record) => record.messageId)).toEqual(failed);
      expect(second.records[0]?.attributes.ApproximateReceiveCount).toBe('2');
      expect(second.answer).toEqual({ batchItemFailures: [] });
      expect(outcomes.filter((outcome) => outcome.kind === 'retry').map((o) => o.deliveryCount)).toEqual([1]);
      expect(outcomes.at(-1)).toMatchObject({ kind: 'executed', deliveryCount: 2, key: `${tag}-2` });
      expect([...(await db.counts(tag)).values()]).toEqual([1, 1, 1, 1, 1]);
    });

    it("runs as Middy's base handler: the partial batch response reaches Lambda through the middleware chain", async () => {
      const seen: unknown[] = [];
      let failing = true;
      const source = eventSource({
        retry: { delays: ['1s'] },
        afterWrite: (event) => {
          if (failing && event.eventId === `${tag}-1`) throw new Error('downstream refused');
        },
        wrap: (handler) =>
          middy(handler).use({
            after: (request) => {
              seen.push(request.response);
            },
          }),
      });
      await publish(events(tag, 3));
      const first = await nextInvocation(source);
      const failed = ids(first, (event) => event.eventId === `${tag}-1`);
      expect(first.answer).toEqual({ batchItemFailures: failed.map((id) => ({ itemIdentifier: id })) });
      expect(seen).toEqual([first.answer]);
      failing = false;
      const second = await nextInvocation(source);
      expect(second.answer).toEqual({ batchItemFailures: [] });
      expect([...(await db.counts(tag)).values()]).toEqual([1, 1, 1]);
    });

    it("hides a retried record for the retry policy's delay, not the queue's visibility timeout", async () => {
      let failing = true;
      const source = eventSource({
        retry: { delays: ['6s'] },
        afterWrite: (event) => {
          if (failing && event.eventId === `${tag}-0`) throw new Error('downstream refused');
        },
      });
      await publish(events(tag, 1));
      const first = await nextInvocation(source);
      const failedAt = performance.now();
      expect(first.answer?.batchItemFailures).toHaveLength(1);
      failing = false;
      // The queue's visibility timeout (2 s) passes: the record stays hidden.
      while (performance.now() - failedAt < 4000) expect(await source.invokeOnce()).toBeUndefined();
      const second = await nextInvocation(source);
      expect(performance.now() - failedAt).toBeGreaterThan(5000);
      expect(second.records[0]?.attributes.ApproximateReceiveCount).toBe('2');
      expect(second.answer).toEqual({ batchItemFailures: [] });
      expect([...(await db.counts(tag)).values()]).toEqual([1]);
    });

    it("leaves a retried record to the queue's visibility timeout with retryDelay: 'queue'", async () => {
      let failing = true;
      const source = eventSource({
        retry: { delays: ['6s'] },
        handler: { retryDelay: 'queue' },
        afterWrite: (event) => {
          if (failing && event.eventId === `${tag}-0`) throw new Error('downstream refused');
        },
      });
      await publish(events(tag, 1));
      await nextInvocation(source);
      const failedAt = performance.now();
      failing = false;
      await nextInvocation(source);
      expect(performance.now() - failedAt).toBeLessThan(5000);
    });

    it('absorbs duplicate deliveries: copies of an event in one batch and in a later one give one effect', async () => {
      const source = eventSource();
      const [event] = events(tag, 1) as [PaymentEvent];
      await publish([event, event, event]);
      const first = await nextInvocation(source);
      expect(first.answer).toEqual({ batchItemFailures: [] });
      await publish([event]);
      const second = await nextInvocation(source);
      expect(second.answer).toEqual({ batchItemFailures: [] });
      expect(second.deleted).toHaveLength(1);
      expect(await db.counts(tag)).toEqual(new Map([[event.eventId, 1]]));
      expect(outcomes.map((outcome) => outcome.kind).sort()).toEqual([
        'duplicate',
        'duplicate',
        'duplicate',
        'executed',
      ]);
    });

    it('sends a dead letter to its own queue with the reason before reporting the record done', async () => {
      const dlqUrl = await createQueue(client, 'oncemq-lambda-dlq');
      try {
        const source = eventSource({
          handler: {
            deadLetter: async ({ record, outcome }) => {
              await client.send(
                new SendMessageCommand({
                  QueueUrl: dlqUrl,
                  MessageBody: record.body,
                  MessageAttributes: {
                    'oncemq-dlq-reason': { DataType: 'String', StringValue: outcome.reason },
                  },
                }),
              );
            },
          },
        });
        await sendMessages(client, queueUrl, [
          { body: 'not json' },
          { body: JSON.stringify(events(tag, 1)[0]) },
        ]);
        const invocation = await nextInvocation(source);
        expect(invocation.answer).toEqual({ batchItemFailures: [] });
        expect(invocation.deleted).toHaveLength(2);
        const letters = await client.send(
          new ReceiveMessageCommand({ QueueUrl: dlqUrl, MessageAttributeNames: ['All'], WaitTimeSeconds: 1 }),
        );
        expect(
          letters.Messages?.map((m) => [m.Body, m.MessageAttributes?.['oncemq-dlq-reason']?.StringValue]),
        ).toEqual([['not json', 'malformed']]);
      } finally {
        await deleteQueue(client, dlqUrl);
      }
    });

    it("leaves a dead letter to the queue's redrive policy by default: reported failed, never applied", async () => {
      const source = eventSource();
      await sendMessages(client, queueUrl, [{ body: 'not json' }]);
      const invocation = await nextInvocation(source);
      expect(invocation.answer).toEqual({
        batchItemFailures: [{ itemIdentifier: invocation.records[0]?.messageId }],
      });
      expect(outcomes).toMatchObject([{ kind: 'dead', reason: 'malformed' }]);
      expect(await db.total()).toBe(0);
    });

    it('a handler killed mid-batch by the timeout leaves no effect; the batch comes back whole and is applied once', async () => {
      const hung = new Set<string>();
      const source = eventSource(
        {
          afterWrite: (event) => {
            if (event.eventId !== `${tag}-3` || hung.has(event.eventId)) return;
            hung.add(event.eventId);
            return new Promise<void>(() => undefined); // the process stalls here until Lambda kills it
          },
          lease: '1s',
        },
        { timeoutMs: 2500 },
      );
      await publish(events(tag, 5));
      const first = await nextInvocation(source);
      expect(first.ended).toBe('timed-out');
      expect(first.deleted).toEqual([]);
      expect(await db.total()).toBe(0); // the three written before the stall rolled back with it

      const second = await nextInvocation(source);
      expect(second.ended).toBe('answered');
      expect(second.records).toHaveLength(5);
      expect(second.records.map((record) => record.attributes.ApproximateReceiveCount)).toEqual(
        Array(5).fill('2'),
      );
      expect(second.answer).toEqual({ batchItemFailures: [] });
      expect(source.counts.coldStarts).toBe(2);
      expect([...(await db.counts(tag)).values()]).toEqual([1, 1, 1, 1, 1]);
    });

    it('starts no record whose lease would outlive the invocation: the rest are reported failed, untouched, before the timeout', async () => {
      // 3 s invocation, 1 s lease + 200 ms reserve, 700 ms per record one at a time: records start at
      // about 0, 0.7 and 1.4 s; at 2.1 s only 0.9 s is left, so the last two are not started.
      const source = eventSource(
        { workMs: 700, lease: '1s', handler: { batchSize: 1, reserve: '200ms' } },
        { timeoutMs: 3000 },
      );
      await publish(events(tag, 5));
      const first = await nextInvocation(source);
      expect(first.ended).toBe('answered');
      expect(source.counts.timeouts).toBe(0);
      expect(first.records).toHaveLength(5);
      const untouched = first.records.slice(3).map((record) => ({ itemIdentifier: record.messageId }));
      expect(first.answer).toEqual({ batchItemFailures: untouched });
      expect(await db.total()).toBe(3);
      expect(outcomes).toHaveLength(3);

      const second = await nextInvocation(source);
      expect(second.answer).toEqual({ batchItemFailures: [] });
      expect([...(await db.counts(tag)).values()]).toEqual([1, 1, 1, 1, 1]);
    });
  },
);
