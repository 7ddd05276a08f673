/**
 * The embedded broker: RocketMQ's delivery model in a SQLite file, no server needed (docs/transports/local.md).
 *
 * @module oncemq/local
 */
export { LocalBroker } from './transport/local/local-broker.js';
export type { LocalDeadLetters } from './transport/local/local-broker.js';
export { DEFAULT_LOCAL_BROKER_CONFIG } from './transport/local/local-broker-config.js';
export type { LocalBrokerConfig } from './transport/local/local-broker-config.js';
export { LocalSubscription } from './transport/local/local-subscription.js';
export type { LocalSubscribeOptions } from './transport/local/local-subscription.js';
export {
  DEFAULT_TRANSACTION_PRODUCER_CONFIG,
  TransactionProducer,
} from './transport/local/transaction-producer.js';
export type {
  HalfMessageView,
  TransactionProducerConfig,
  TransactionSendResult,
  TransactionState,
} from './transport/local/transaction-producer.js';
export type { StoredMessage } from './transport/local/broker-store.js';
export { DeadLetterStore } from './transport/local/dead-letter-store.js';
export type { HalfMessage } from './transport/local/half-message-store.js';
export { CHECK_MAX_TOPIC, retryTopic } from './transport/local/broker-schema.js';
export type { LocalFaultHooks } from './transport/local/fault-hooks.js';
export { allocateQueues } from './transport/local/queue-allocation.js';
export type { QueueRef } from './transport/local/queue-allocation.js';
export { roundRobinSelector, stableHash } from './transport/local/queue-selector.js';
export type { QueueSelector } from './transport/local/queue-selector.js';
