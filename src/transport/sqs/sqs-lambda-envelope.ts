import { adoptEnvelope, type Envelope } from '../../core/envelope.js';
import type { NormalisedSqsRecord } from './sqs-lambda-event.js';

const encoder = new TextEncoder();

/**
 * A normalised SQS record as an envelope for the Lambda handler: the message id is the broker id, the
 * queue the topic, the string attributes the headers, `ApproximateReceiveCount` the delivery count (a
 * record Lambda reports failed comes back with it one higher), the message group the ordering key.
 */
export function lambdaRecordEnvelope(record: NormalisedSqsRecord, topic: string): Envelope {
  return adoptEnvelope({
    brokerId: record.messageId,
    topic,
    headers: { ...record.attributes },
    body: encoder.encode(record.body),
    deliveryCount: record.receiveCount,
    brokerDeliveryCount: record.receiveCount,
    ...(record.sentTimestamp === undefined ? {} : { publishedAt: new Date(record.sentTimestamp) }),
    ...(record.messageGroupId === undefined ? {} : { orderingKey: record.messageGroupId }),
  });
}
