/**
 * The RocketMQ 5 transport, through rocketmq-client-nodejs 1.0.8 (docs/transports/rocketmq.md).
 *
 * @module oncemq/rocketmq
 */
export { RocketMQTransport } from './transport/rocketmq/rocketmq-transport.js';
export {
  DEFAULT_ROCKETMQ_TRANSPORT_CONFIG,
  DEFAULT_ROCKETMQ_URL,
  MIN_INVISIBLE_MS,
  RETRY_MAX_TIMES_GRACE,
  ROCKETMQ_DEFAULT_RETRY_MAX_TIMES,
  parseRocketMQUrl,
} from './transport/rocketmq/rocketmq-config.js';
export type { RocketMQTransportConfig } from './transport/rocketmq/rocketmq-config.js';
export { RocketMQSubscription } from './transport/rocketmq/rocketmq-subscription.js';
export { RocketMQDeadLetters } from './transport/rocketmq/rocketmq-dead-letters.js';
export {
  ROCKETMQ_MAX_MESSAGE_BYTES,
  ROCKETMQ_MAX_PROPERTY_BYTES,
} from './transport/rocketmq/rocketmq-delivery.js';
export {
  PRODUCER_GROUP_PROPERTY,
  RocketMQTransactionProducer,
} from './transport/rocketmq/rocketmq-transaction-producer.js';
export type { RocketMQTransactionProducerConfig } from './transport/rocketmq/rocketmq-transaction-producer.js';
export {
  deadLetterTopic,
  MAX_DELIVERIES_REASON,
  REMOVED_PROPERTY,
  REPLAY_GROUP_PROPERTY,
  ROCKETMQ_GROUP_PATTERN,
  ROCKETMQ_TOPIC_PATTERN,
} from './transport/rocketmq/rocketmq-names.js';
export { RocketMQAdmin } from './transport/rocketmq/rocketmq-admin.js';
export type { GroupSpec, RocketMQMessageType, TopicSpec } from './transport/rocketmq/rocketmq-admin.js';
export type {
  MessageViewLike,
  ProducerLike,
  SimpleConsumerLike,
} from './transport/rocketmq/rocketmq-driver.js';
