/**
 * The Kafka transport, through @platformatic/kafka (docs/transports/kafka.md).
 *
 * @module oncemq/kafka
 */
export { KafkaTransport } from './transport/kafka/kafka-transport.js';
export type { KafkaSubscription } from './transport/kafka/kafka-subscription.js';
export { DEFAULT_KAFKA_TRANSPORT_CONFIG } from './transport/kafka/kafka-config.js';
export type { KafkaSubscribeOptions, KafkaTransportConfig } from './transport/kafka/kafka-config.js';

import type { KafkaTransportConfig } from './transport/kafka/kafka-config.js';
import { KafkaTransport } from './transport/kafka/kafka-transport.js';

/** A Kafka transport on `url` (`kafka://host:9092[,host:9092]`), with its client loaded and connected. */
export async function createKafkaTransport(
  url: string,
  config: Omit<KafkaTransportConfig, 'url'> = {},
): Promise<KafkaTransport> {
  const transport = new KafkaTransport({ ...config, url });
  await transport.init();
  return transport;
}
