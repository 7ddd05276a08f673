/**
 * The NATS JetStream transport, through @nats-io/transport-node 3 (docs/transports/nats.md).
 *
 * @module oncemq/nats
 */
export { NatsTransport } from './transport/nats/nats-transport.js';
export type { NatsSubscribeOptions } from './transport/nats/nats-transport.js';
export { DEFAULT_NATS_TRANSPORT_CONFIG } from './transport/nats/nats-config.js';
export type { NatsTopology, NatsTransportConfig } from './transport/nats/nats-config.js';
export type { NatsConnectionLike } from './transport/nats/nats-driver.js';
export type { NatsSubscription } from './transport/nats/nats-subscription.js';
export type { NatsDeadLetters } from './transport/nats/nats-dead-letters.js';
