/**
 * The RabbitMQ transport, through amqplib ≥ 2.1 (docs/transports/rabbitmq.md).
 *
 * @module oncemq/rabbitmq
 */
export { RabbitTransport } from './transport/rabbitmq/rabbitmq-transport.js';
export {
  DEFAULT_RABBIT_TRANSPORT_CONFIG,
  DEFAULT_RABBITMQ_DELAY_LEVELS,
} from './transport/rabbitmq/rabbitmq-config.js';
export type { RabbitTransportConfig } from './transport/rabbitmq/rabbitmq-config.js';
export type { RabbitSubscription } from './transport/rabbitmq/rabbitmq-subscription.js';
export { UnconfirmedPublishError } from './transport/rabbitmq/rabbitmq-channel.js';
export type { UnconfirmedReason } from './transport/rabbitmq/rabbitmq-channel.js';
export type {
  AmqpChannelLike,
  AmqpConnectionLike,
  AmqpHeaders,
  AmqpMessageLike,
  AmqpModelLike,
  AmqpProperties,
  AmqpPublishOptions,
} from './transport/rabbitmq/rabbitmq-driver.js';
