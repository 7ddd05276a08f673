import type { SqsAttributeValue, SqsRecord } from './sqs-record.js';

/**
 * The shapes Lambda hands an SQS-triggered function, typed by what oncemq reads (no `@types/aws-lambda`
 * needed), and the record normaliser: a Lambda SQS record into the normalised SQS record that the SQS
 * transport maps to an envelope.
 */

/** A message attribute as Lambda writes it in an SQS event (lowercase, unlike the SDK's). */
export interface SqsLambdaMessageAttribute {
  /** The value of a `String` or `Number` attribute. */
  readonly stringValue?: string | undefined;
  /** Base64 of the bytes, for a `Binary` attribute. */
  readonly binaryValue?: string | undefined;
  /** Reserved by SQS; not used. */
  readonly stringListValues?: readonly string[] | undefined;
  /** Reserved by SQS; not used. */
  readonly binaryListValues?: readonly string[] | undefined;
  /** `String`, `Number`, `Binary`, or one of them with a custom suffix (`String.json`). */
  readonly dataType: string;
}

/** One record of a Lambda SQS event. */
export interface SqsLambdaRecord {
  /** SQS's id of the message (the `itemIdentifier` of a partial batch response). */
  readonly messageId: string;
  /** The handle of this receive of the message. */
  readonly receiptHandle: string;
  /** The message's body, as text. */
  readonly body: string;
  /**
   * The message's system attributes, as text: `ApproximateReceiveCount`, `SentTimestamp`,
   * `ApproximateFirstReceiveTimestamp`, `SenderId`, and on FIFO queues `MessageGroupId`,
   * `MessageDeduplicationId`, `SequenceNumber`.
   */
  readonly attributes: Readonly<Record<string, string | undefined>>;
  /** The message's own attributes, by name. */
  readonly messageAttributes: Readonly<Record<string, SqsLambdaMessageAttribute>>;
  /** The MD5 digest of the body, in hex. */
  readonly md5OfBody?: string | undefined;
  /** Always `aws:sqs`. */
  readonly eventSource: string;
  /** `arn:aws:sqs:<region>:<account>:<queue name>`. */
  readonly eventSourceARN: string;
  /** The queue's region. */
  readonly awsRegion?: string | undefined;
}

/** The event of an SQS-triggered invocation: up to the event source mapping's batch size of records. */
export interface SqsLambdaEvent {
  /** The records of the batch, in the order received. */
  readonly Records: readonly SqsLambdaRecord[];
}

/** What oncemq reads of the invocation's context. */
export interface LambdaContextLike {
  /** Time left before Lambda ends the invocation, in milliseconds. */
  getRemainingTimeInMillis(): number;
  /** The invocation's request id (logged with what oncemq reports). */
  readonly awsRequestId?: string | undefined;
}

/** An item of a partial batch response: the `messageId` of a record to be delivered again. */
export interface SqsBatchItemFailure {
  /** The record's `messageId`. */
  readonly itemIdentifier: string;
}

/**
 * Lambda's partial batch response (the event source mapping needs `ReportBatchItemFailures` among its
 * `FunctionResponseTypes`): the records named are left at the queue to come again after their
 * visibility timeout; every other record of the batch is deleted.
 */
export interface SqsBatchResponse {
  /** The records to be delivered again; empty when every record is done. */
  readonly batchItemFailures: SqsBatchItemFailure[];
}

/** The queue's name in an SQS ARN (`arn:aws:sqs:<region>:<account>:<name>`), or the ARN as it is. */
export function queueNameOfArn(arn: string): string {
  const name = arn.slice(arn.lastIndexOf(':') + 1);
  return name === '' ? arn : name;
}

function wholeNumber(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{1,15}$/.test(text)) return undefined;
  return Number(text);
}

/**
 * A Lambda SQS record as the SQS transport's normalised record: `ApproximateReceiveCount` as the
 * receive count (1 when Lambda left it out), the `String` message attributes by name, the `Number` and
 * `Binary` ones (Lambda writes binary values in base64) as the record's other attributes.
 */
export function normaliseLambdaRecord(record: SqsLambdaRecord): SqsRecord {
  const attributes: Record<string, string> = {};
  let other: Record<string, SqsAttributeValue> | undefined;
  for (const [name, attribute] of Object.entries(record.messageAttributes)) {
    const type = attribute.dataType;
    if (type.startsWith('String')) attributes[name] = attribute.stringValue ?? '';
    else
      (other ??= {})[name] = {
        dataType: type,
        stringValue: attribute.stringValue,
        binaryValue:
          attribute.binaryValue === undefined
            ? undefined
            : new Uint8Array(Buffer.from(attribute.binaryValue, 'base64')),
      };
  }
  const groupId = record.attributes.MessageGroupId;
  return {
    messageId: record.messageId,
    receiptHandle: record.receiptHandle,
    body: record.body,
    receiveCount: Math.max(1, wholeNumber(record.attributes.ApproximateReceiveCount) ?? 1),
    sentTimestamp: wholeNumber(record.attributes.SentTimestamp),
    messageGroupId: groupId === undefined || groupId === '' ? undefined : groupId,
    attributes,
    otherAttributes: other,
  };
}
