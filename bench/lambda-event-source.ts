/**
 * A local stand-in for Lambda's SQS event source mapping, for the tests and the `sqs` bench: it
 * receives from an SQS queue (ElasticMQ here) in batches of up to 10, builds the SQS event as Lambda
 * does, invokes a handler with a context whose `getRemainingTimeInMillis()` counts down the function's
 * timeout, and then does what Lambda does with the answer:
 * - a response with `batchItemFailures`: deletes every other record; the ones named come again after
 *   the visibility timeout (a name that is not a record of the batch fails the whole batch, as on AWS);
 * - a response without failures (or none at all): deletes the whole batch;
 * - a throw: deletes nothing;
 * - a timeout: stops waiting, deletes nothing, and throws the execution environment away (`kill()`):
 *   the next invocation gets a new one, as Lambda resets the environment of a timed-out invocation.
 */
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type {
  LambdaContextLike,
  SqsLambdaEvent,
  SqsLambdaRecord,
} from '../src/transport/sqs/sqs-lambda-event.js';

/** A partial batch response, or anything else a handler returns. */
type HandlerAnswer =
  { readonly batchItemFailures?: readonly { readonly itemIdentifier?: string }[] } | undefined;

/** One execution environment: a handler and what it holds (pools, clients), thrown away on a timeout. */
export interface LambdaRuntime {
  handler(event: SqsLambdaEvent, context: LambdaContextLike): Promise<HandlerAnswer>;
  /** Ends the environment at once, as a killed process would: its connections drop, nothing finishes. */
  kill(): Promise<void>;
  /** Ends it in order, when the event source stops. @default kill() */
  close?(): Promise<void>;
}

export interface LambdaEventSourceConfig {
  readonly client: SQSClient;
  readonly queueUrl: string;
  /** Records per event, at most 10 (the SQS receive limit). @default 10 */
  readonly batchSize?: number;
  /** The function's timeout. */
  readonly timeoutMs: number;
  /** The queue's visibility timeout, in whole seconds (as `ReceiveMessage` takes it). */
  readonly visibilitySeconds: number;
  /** Long polling of each receive, in seconds. @default 1 */
  readonly waitSeconds?: number;
  /** Makes a new execution environment (a cold start). */
  readonly runtime: () => Promise<LambdaRuntime>;
  /** Told of every invocation. */
  readonly onInvocation?: (invocation: Invocation) => void;
}

/** What became of one invocation. */
export interface Invocation {
  readonly records: readonly SqsLambdaRecord[];
  /** How the invocation ended. */
  readonly ended: 'answered' | 'threw' | 'timed-out';
  /** The handler's answer, when it answered. */
  readonly answer?: HandlerAnswer;
  /** What the handler threw, when it threw. */
  readonly error?: unknown;
  /** The messageIds the event source deleted. */
  readonly deleted: readonly string[];
  readonly elapsedMs: number;
}

/** Turns a received message into the record Lambda would hand the function. */
export function lambdaRecord(message: Message, queueArn: string): SqsLambdaRecord {
  const messageAttributes: Record<string, SqsLambdaRecord['messageAttributes'][string]> = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      stringValue: value.StringValue,
      binaryValue:
        value.BinaryValue === undefined ? undefined : Buffer.from(value.BinaryValue).toString('base64'),
      stringListValues: [],
      binaryListValues: [],
      dataType: value.DataType ?? 'String',
    };
  }
  const parts = queueArn.split(':');
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes: { ...message.Attributes },
    messageAttributes,
    md5OfBody: message.MD5OfBody,
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: parts[3] ?? 'elasticmq',
  };
}

const TIMED_OUT = Symbol('timed out');

/** The event source mapping of one queue, invoking one execution environment at a time. */
export class LambdaEventSource {
  readonly #config: LambdaEventSourceConfig;
  #queueArn: string | undefined;
  #runtime: LambdaRuntime | undefined;
  #running: Promise<void> | undefined;
  #stopping = false;
  /** Counts of the invocations so far. */
  readonly counts = { invocations: 0, timeouts: 0, throws: 0, coldStarts: 0, deleted: 0 };

  constructor(config: LambdaEventSourceConfig) {
    if ((config.batchSize ?? 10) > 10) throw new Error('an SQS event source receives at most 10 at once');
    this.#config = config;
  }

  /** Receives one batch and invokes the function with it; `undefined` when the receive found nothing. */
  async invokeOnce(): Promise<Invocation | undefined> {
    const { client, queueUrl } = this.#config;
    this.#queueArn ??= await queueArnOf(client, queueUrl);
    const received = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: this.#config.batchSize ?? 10,
        WaitTimeSeconds: this.#config.waitSeconds ?? 1,
        VisibilityTimeout: this.#config.visibilitySeconds,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const messages = received.Messages ?? [];
    if (messages.length === 0) return undefined;
    return this.invoke(messages);
  }

  /** Invokes the function with these received messages and settles them as Lambda would. */
  async invoke(messages: readonly Message[]): Promise<Invocation> {
    const queueArn = (this.#queueArn ??= await queueArnOf(this.#config.client, this.#config.queueUrl));
    const records = messages.map((message) => lambdaRecord(message, queueArn));
    if (this.#runtime === undefined) {
      this.counts.coldStarts++;
      this.#runtime = await this.#config.runtime();
    }
    const runtime = this.#runtime;
    const started = performance.now();
    const deadline = started + this.#config.timeoutMs;
    const context: LambdaContextLike = {
      getRemainingTimeInMillis: () => Math.max(0, Math.round(deadline - performance.now())),
      awsRequestId: `local-${this.counts.invocations}`,
    };
    this.counts.invocations++;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => resolve(TIMED_OUT), this.#config.timeoutMs);
    });
    let ended: Invocation['ended'];
    let answer: HandlerAnswer | undefined;
    let error: unknown;
    try {
      const result = await Promise.race([runtime.handler({ Records: records }, context), timeout]);
      if (result === TIMED_OUT) ended = 'timed-out';
      else {
        ended = 'answered';
        answer = result;
      }
    } catch (thrown) {
      ended = 'threw';
      error = thrown;
    } finally {
      clearTimeout(timer);
    }
    if (ended === 'timed-out') {
      this.counts.timeouts++;
      this.#runtime = undefined;
      await runtime.kill();
    } else if (ended === 'threw') {
      this.counts.throws++;
    }
    const toDelete = ended === 'answered' ? succeeded(records, answer) : [];
    await this.#delete(toDelete);
    this.counts.deleted += toDelete.length;
    const invocation: Invocation = {
      records,
      ended,
      ...(answer === undefined ? {} : { answer }),
      ...(ended === 'threw' ? { error } : {}),
      deleted: toDelete.map((record) => record.messageId),
      elapsedMs: performance.now() - started,
    };
    this.#config.onInvocation?.(invocation);
    return invocation;
  }

  async #delete(records: readonly SqsLambdaRecord[]): Promise<void> {
    if (records.length === 0) return;
    const answer = await this.#config.client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: this.#config.queueUrl,
        Entries: records.map((record, i) => ({ Id: String(i), ReceiptHandle: record.receiptHandle })),
      }),
    );
    if ((answer.Failed ?? []).length > 0) {
      throw new Error(`DeleteMessageBatch failed: ${JSON.stringify(answer.Failed)}`);
    }
  }

  /** Polls and invokes until {@link stop}; an invocation's error ends the loop with it. */
  start(): void {
    if (this.#running !== undefined) return;
    this.#stopping = false;
    this.#running = (async () => {
      while (!this.#stopping) await this.invokeOnce();
    })();
  }

  /** Stops polling after the invocation under way, and closes the execution environment. */
  async stop(): Promise<void> {
    this.#stopping = true;
    const running = this.#running;
    this.#running = undefined;
    try {
      await running;
    } finally {
      const runtime = this.#runtime;
      this.#runtime = undefined;
      await (runtime?.close ?? runtime?.kill)?.call(runtime);
    }
  }
}

/** The records Lambda deletes after `answer`: all but the failures named; none if one names no record. */
function succeeded(
  records: readonly SqsLambdaRecord[],
  answer: HandlerAnswer | undefined,
): SqsLambdaRecord[] {
  const failures = answer?.batchItemFailures ?? [];
  const ids = new Set(records.map((record) => record.messageId));
  const failed = new Set<string>();
  for (const failure of failures) {
    if (failure.itemIdentifier === undefined || !ids.has(failure.itemIdentifier)) return [];
    failed.add(failure.itemIdentifier);
  }
  return records.filter((record) => !failed.has(record.messageId));
}

async function queueArnOf(client: SQSClient, queueUrl: string): Promise<string> {
  const answer = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  const arn = answer.Attributes?.QueueArn;
  if (arn === undefined) throw new Error(`no QueueArn for ${queueUrl}`);
  return arn;
}
