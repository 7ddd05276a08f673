/**
 * The NATS JetStream transport, through @nats-io/transport-node 3 (docs/transports/nats.md).
 *
 * @module oncemq/nats
 */
export { JETSTREAM_MAX_HEADER_BYTES, NatsTransport } from './transport/nats/nats-transport.js';
export type { NatsSubscribeOptions } from './transport/nats/nats-transport.js';
export { DEFAULT_NATS_TRANSPORT_CONFIG, MAX_DELIVER_GRACE } from './transport/nats/nats-config.js';
export type { NatsTopology, NatsTransportConfig } from './transport/nats/nats-config.js';
export type { NatsConnectionLike } from './transport/nats/nats-driver.js';
export { MAX_DELIVERIES_REASON } from './transport/nats/nats-delivery.js';
export { NatsSubscription } from './transport/nats/nats-subscription.js';
export { NatsDeadLetters } from './transport/nats/nats-dead-letters.js';
export {
  consumerName,
  NATS_TOPIC_PATTERN,
  RETRY_DUE_HEADER,
  RETRY_PUBLISHED_HEADER,
  RETRY_TOPIC_HEADER,
} from './transport/nats/nats-names.js';
