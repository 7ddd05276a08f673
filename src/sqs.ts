/**
 * The Amazon SQS transport, through @aws-sdk/client-sqs (docs/transports/sqs.md); runs on ElasticMQ too.
 *
 * @module oncemq/sqs
 */
export { SqsTransport } from './transport/sqs/sqs-transport.js';
export type { SqsTransportConfig } from './transport/sqs/sqs-config.js';
export type { SqsSubscription } from './transport/sqs/sqs-subscription.js';
export type { SqsDeadLetters } from './transport/sqs/sqs-dead-letters.js';
export { sqsPublishInput, type SqsSendMessage } from './transport/sqs/sqs-message.js';
export {
  sqsEnvelope,
  sqsRecordOf,
  type SqsEnvelopeContext,
  type SqsRecord,
  type SqsAttributeValue,
} from './transport/sqs/sqs-record.js';
export {
  DEFAULT_SQS_LAMBDA_LEASE_MS,
  DEFAULT_SQS_LAMBDA_RESERVE,
  sqsHandler,
} from './transport/sqs/sqs-lambda-handler.js';
export type {
  SqsDeadLetterStore,
  SqsHandlerOptions,
  SqsLambdaDeadLetter,
  SqsLambdaHandler,
  SqsLambdaProcessor,
} from './transport/sqs/sqs-lambda-handler.js';
export { normaliseLambdaRecord } from './transport/sqs/sqs-lambda-event.js';
export type {
  LambdaContextLike,
  SqsBatchItemFailure,
  SqsBatchResponse,
  SqsLambdaEvent,
  SqsLambdaMessageAttribute,
  SqsLambdaRecord,
} from './transport/sqs/sqs-lambda-event.js';
