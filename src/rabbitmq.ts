/**
 * The RabbitMQ transport, through amqplib ≥ 2.1 (docs/transports/rabbitmq.md).
 *
 * @module oncemq/rabbitmq
 */
export { RabbitTransport } from './transport/rabbitmq/rabbit-transport.js';
export {
  DEFAULT_RABBIT_TRANSPORT_CONFIG,
  DEFAULT_RABBITMQ_DELAY_LEVELS,
} from './transport/rabbitmq/rabbit-config.js';
export type { RabbitSettings, RabbitTransportConfig } from './transport/rabbitmq/rabbit-config.js';
export { RabbitSubscription } from './transport/rabbitmq/rabbit-subscription.js';
export { RabbitNames, RABBIT_TOPIC_PATTERN, delayLevel } from './transport/rabbitmq/rabbit-names.js';
export {
  LOG_FENCE_HEADER,
  ORIGINAL_QUEUE_HEADER,
  RETRY_DUE_HEADER,
  TOPIC_HEADER,
} from './transport/rabbitmq/rabbit-message.js';
export { UnconfirmedPublishError } from './transport/rabbitmq/rabbit-channel.js';
export { AMQP_MAX_HEADER_BYTES } from './transport/rabbitmq/rabbit-settle.js';
export type { UnconfirmedReason } from './transport/rabbitmq/rabbit-channel.js';
export type {
  AmqpChannelLike,
  AmqpConnectionLike,
  AmqpHeaders,
  AmqpMessageLike,
  AmqpModelLike,
  AmqpProperties,
  AmqpPublishOptions,
} from './transport/rabbitmq/amqp-like.js';
