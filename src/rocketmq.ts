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
} from './transport/rocketmq/rocketmq-config.js';
export type { RocketMQTransportConfig } from './transport/rocketmq/rocketmq-config.js';
export type { RocketMQSubscription } from './transport/rocketmq/rocketmq-subscription.js';
export type { RocketMQDeadLetters } from './transport/rocketmq/rocketmq-dead-letters.js';
export type {
  RocketMQTransactionProducer,
  RocketMQTransactionProducerConfig,
} from './transport/rocketmq/rocketmq-transaction-producer.js';
