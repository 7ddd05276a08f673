import type { SQSClient } from '@aws-sdk/client-sqs';
import { parseDuration, type Duration } from '../../core/duration.js';
import type { Envelope } from '../../core/envelope.js';
import { ConfigError } from '../../core/errors.js';
import { toLogger, type LoggerLike } from '../../core/logger.js';
import type { Outcome } from '../../core/outcome.js';
import type { DeadLetterOutcome } from '../settler.js';
import type { Processor } from '../transport.js';
import {
  normaliseLambdaRecord,
  queueNameOfArn,
  type LambdaContextLike,
  type SqsBatchResponse,
  type SqsLambdaEvent,
  type SqsLambdaRecord,
} from './sqs-lambda-event.js';
import {
  defaultLambdaSqsClient,
  SqsLambdaRetryDelays,
  type SqsLambdaRetry,
} from './sqs-lambda-retry-delay.js';
import { sqsEnvelope, type SqsRecord } from './sqs-record.js';

/** A record the pipeline dead-lettered, handed to {@link SqsHandlerOptions.deadLetter}. */
export interface SqsLambdaDeadLetter {
  /** The Lambda record dead-lettered. */
  readonly record: SqsLambdaRecord;
  /** The envelope the pipeline processed. */
  readonly envelope: Envelope;
  /** The pipeline's outcome: its reason, error and key. */
  readonly outcome: DeadLetterOutcome;
}

/** Where {@link sqsHandler} can store a dead letter: an `SqsTransport`'s `deadLetters`. */
export interface SqsDeadLetterStore {
  /** Stores the letter; resolves once it is stored. */
  store(letter: SqsLambdaDeadLetter): Promise<void>;
}

/** Options of {@link sqsHandler}. */
export interface SqsHandlerOptions {
  /**
   * What becomes of a record the pipeline dead-letters (a conflict, a malformed body, used-up retries):
   * - `'redrive'` — it is reported failed, so it comes again until the queue's redrive policy
   *   (`maxReceiveCount`) moves it to the queue's dead-letter queue; every receive answers
   *   `dead-letter` again without running the handler. The reason is in the log and the outcome only.
   * - an `SqsTransport`'s `deadLetters` — the letter is stored in the group's dead-letter queue of
   *   that transport's namespace, as the transport's own consumer stores one (reason, error, attempt as
   *   message attributes) with the queue the record came from: `oncemq dlq list|replay|purge
   *   --transport sqs` sees it beside the transport's, and a replay sends it back to that queue. Once
   *   stored the record is reported done and Lambda deletes it; a failed send reports it failed.
   * - a function — it stores the dead letter (an SQS queue of your own, with the reason); once it
   *   resolves the record is reported done and Lambda deletes it. A rejection reports it failed.
   * @default 'redrive'
   */
  readonly deadLetter?: 'redrive' | SqsDeadLetterStore | ((letter: SqsLambdaDeadLetter) => Promise<void>);
  /**
   * The longest one step of work may take: a step (the batch, or one record) is started only while
   * at least `lease + reserve` of the invocation is left, so that no claim's lease outlives the
   * invocation; the records not started are reported failed, untouched. @default the pipeline's lease
   */
  readonly lease?: Duration;
  /** Time kept at the end of the invocation to answer Lambda. @default '500ms' */
  readonly reserve?: Duration;
  /**
   * Records handed to `processBatch` at once. @default the whole event in transactional mode (one
   * claim statement and one commit); 1 in leased mode and on FIFO queues
   */
  readonly batchSize?: number;
  /** The envelopes' topic. @default the queue's name, from the record's `eventSourceARN` */
  readonly topic?: string;
  /**
   * When a record reported failed for a retry comes back:
   * - `'visibility'` — after the retry's `delayMs` (the retry policy's delay, a `busy` key's wait):
   *   the record's visibility is set to it with `ChangeMessageVisibility` before Lambda gets the answer,
   *   in whole seconds, at most 11 h 40 min (SQS's 12 h count from the event source's receive, which
   *   was up to a batching window and a function timeout earlier); a longer delay is served as that. A
   *   change that fails is logged, and that record comes back after the queue's visibility timeout.
   * - `'queue'` — after the queue's visibility timeout, whatever the delay (no SQS call).
   * @default 'visibility'
   */
  readonly retryDelay?: 'visibility' | 'queue';
  /**
   * The SQS client of the visibility changes. @default one made on the first retry, from the function's
   * environment (its region and role, as Lambda sets them)
   */
  readonly client?: SQSClient;
  /** Where the handler logs what it could not do (a visibility change that failed). @default the console logger */
  readonly logger?: LoggerLike;
}

/** What {@link sqsHandler} returns: a Lambda handler of SQS events with a partial batch response. */
export type SqsLambdaHandler = (
  event: SqsLambdaEvent,
  context: LambdaContextLike,
) => Promise<SqsBatchResponse>;

/**
 * What {@link sqsHandler} runs: a pipeline (`createPipeline`), or any processor; a pipeline's `mode`
 * and `leaseMs` are read where present.
 */
export type SqsLambdaProcessor = Processor & {
  /** The pipeline's ledger mode. */
  readonly mode?: 'transactional' | 'leased';
  /** The pipeline's lease, in milliseconds. */
  readonly leaseMs?: number;
};

/** The lease assumed for a processor that tells none (the pipeline's default lease). */
export const DEFAULT_SQS_LAMBDA_LEASE_MS = 30_000;

/** {@link SqsHandlerOptions.reserve}'s default. */
export const DEFAULT_SQS_LAMBDA_RESERVE = '500ms';

/**
 * Wraps a pipeline as a Lambda handler for SQS events. Every record runs through the pipeline
 * (`processBatch`); the handler answers `{ batchItemFailures }` naming the records to deliver again:
 * those whose outcome is `retry` (a failed handler, a busy key, an unreachable ledger), those it did not
 * start for want of time, and dead letters under `deadLetter: 'redrive'`. Records acked (executed or
 * duplicate) and dead letters stored by `deadLetter` are left out, so Lambda deletes them. The event
 * source mapping must have `ReportBatchItemFailures` on, or Lambda ignores the answer.
 *
 * Works as it is as Middy's base handler: `middy(sqsHandler(pipeline)).use(…)`.
 */
export function sqsHandler(pipeline: SqsLambdaProcessor, options: SqsHandlerOptions = {}): SqsLambdaHandler {
  const leaseMs =
    options.lease === undefined
      ? (pipeline.leaseMs ?? DEFAULT_SQS_LAMBDA_LEASE_MS)
      : parseDuration(options.lease, 'sqsHandler.lease');
  const processBatch =
    pipeline.processBatch?.bind(pipeline) ??
    ((envelopes: readonly Envelope[]) =>
      Promise.all(envelopes.map((envelope) => pipeline.process(envelope))));
  const reserveMs = parseDuration(options.reserve ?? DEFAULT_SQS_LAMBDA_RESERVE, 'sqsHandler.reserve');
  const batchSize = options.batchSize;
  if (batchSize !== undefined && !(Number.isInteger(batchSize) && batchSize >= 1)) {
    throw new ConfigError('sqsHandler.batchSize', `expected a whole number >= 1, got ${batchSize}`);
  }
  const deadLetter = options.deadLetter ?? 'redrive';
  let client = options.client;
  const delays =
    (options.retryDelay ?? 'visibility') === 'visibility'
      ? new SqsLambdaRetryDelays(() => (client ??= defaultLambdaSqsClient()), toLogger(options.logger))
      : undefined;

  return async (event, context) => {
    const records = event.Records;
    const budgetMs = leaseMs + reserveMs;
    const remaining = context.getRemainingTimeInMillis();
    if (records.length > 0 && remaining < budgetMs) {
      throw new ConfigError(
        'sqsHandler.lease',
        `the invocation starts with ${remaining}ms left, less than the lease ${leaseMs}ms + reserve ` +
          `${reserveMs}ms: no record could start; set the pipeline's lease below the function's timeout`,
      );
    }
    const normalised = records.map(normaliseLambdaRecord);
    const envelopes = normalised.map((record, index) =>
      lambdaEnvelope(
        record,
        options.topic ?? queueNameOfArn((records[index] as SqsLambdaRecord).eventSourceARN),
      ),
    );
    const fifo = normalised.some((record) => record.messageGroupId !== undefined);
    const size = batchSize ?? (fifo || pipeline.mode === 'leased' ? 1 : records.length);
    const failed = new Set<number>();
    // FIFO: once a record of a group fails, the group's later records are not run (Lambda keeps a
    // group's order only if they come again after it).
    const blockedGroups = new Set<string>();
    const retries: SqsLambdaRetry[] = [];
    let next = 0;
    while (next < records.length) {
      if (context.getRemainingTimeInMillis() < budgetMs) break;
      const indexes: number[] = []; // positions in the event's records
      for (; next < records.length && indexes.length < size; next++) {
        const group = normalised[next]?.messageGroupId;
        if (group !== undefined && blockedGroups.has(group)) failed.add(next);
        else indexes.push(next);
      }
      if (indexes.length === 0) continue;
      let outcomes: readonly Outcome[] | undefined;
      try {
        outcomes = await processBatch(indexes.map((i) => envelopes[i] as Envelope));
      } catch {
        outcomes = undefined; // nothing is known of the step: all of it comes again
      }
      await Promise.all(
        indexes.map(async (index, position) => {
          const outcome = outcomes?.[position];
          const done =
            outcome !== undefined &&
            (await settled(
              outcome,
              records[index] as SqsLambdaRecord,
              envelopes[index] as Envelope,
              deadLetter,
            ));
          if (outcome?.action === 'retry') {
            retries.push({ record: records[index] as SqsLambdaRecord, delayMs: outcome.delayMs });
          }
          if (!done) {
            failed.add(index);
            const group = normalised[index]?.messageGroupId;
            if (group !== undefined) blockedGroups.add(group);
          }
        }),
      );
    }
    // A retry comes back after its delay, not the queue's visibility timeout.
    if (retries.length > 0) await delays?.delay(retries);
    // Out of time: the records not started come again, untouched.
    for (; next < records.length; next++) failed.add(next);
    return {
      batchItemFailures: [...failed]
        .sort((a, b) => a - b)
        .map((index) => ({ itemIdentifier: (records[index] as SqsLambdaRecord).messageId })),
    };
  };
}

/** Whether the record is done with (Lambda may delete it): an ack, or a dead letter stored. */
async function settled(
  outcome: Outcome,
  record: SqsLambdaRecord,
  envelope: Envelope,
  deadLetter: NonNullable<SqsHandlerOptions['deadLetter']>,
): Promise<boolean> {
  switch (outcome.action) {
    case 'ack':
      return true;
    case 'retry':
      return false;
    case 'dead-letter':
      if (deadLetter === 'redrive') return false;
      return (
        typeof deadLetter === 'function'
          ? deadLetter({ record, envelope, outcome })
          : deadLetter.store({ record, envelope, outcome })
      ).then(
        () => true,
        () => false,
      );
  }
}

/**
 * The transport's envelope of a record, charged with every receive: a record reported failed comes
 * back through Lambda's redelivery, one receive later, and no copy carrying a count is sent, so the
 * delivery count is the count the message came with (`oncemq-delivery-count`, 1 for a first copy) plus
 * its receives before this one. A `busy` answer or an unreachable ledger costs a receive here.
 */
function lambdaEnvelope(record: SqsRecord, topic: string): Envelope {
  const envelope = sqsEnvelope(record, { topic });
  const deliveryCount = envelope.deliveryCount + record.receiveCount - 1;
  return Object.freeze({ ...envelope, deliveryCount });
}
