/**
 * The embedded broker: RocketMQ's delivery model in a SQLite file, no server needed (docs/transports/local.md).
 *
 * @module oncemq/local
 */
export { LocalBroker } from './transport/local/local-transport.js';
export type { LocalDeadLetters } from './transport/local/local-transport.js';
export { DEFAULT_LOCAL_BROKER_CONFIG } from './transport/local/local-config.js';
export type { LocalBrokerConfig } from './transport/local/local-config.js';
export type { LocalSubscribeOptions, LocalSubscription } from './transport/local/local-subscription.js';
export { DEFAULT_TRANSACTION_PRODUCER_CONFIG } from './transport/half-message.js';
export type { TransactionProducer } from './transport/local/local-transaction-producer.js';
export type {
  HalfMessageView,
  TransactionProducerConfig,
  TransactionSendResult,
  TransactionState,
} from './transport/half-message.js';
export type { StoredMessage } from './transport/local/local-store.js';
export type { LocalFaultHooks } from './transport/local/local-fault-hooks.js';
export { roundRobinSelector } from './transport/local/local-queue-selector.js';
export type { QueueSelector } from './transport/local/local-queue-selector.js';
