/**
 * The Kafka transport, through @platformatic/kafka (docs/transports/kafka.md).
 *
 * @module oncemq/kafka
 */
export { KafkaTransport } from './transport/kafka/kafka-transport.js';
export { KafkaSubscription } from './transport/kafka/kafka-subscription.js';
export { KafkaDeadLetters } from './transport/kafka/kafka-dead-letters.js';
export { brokersOfUrl, DEFAULT_KAFKA_TRANSPORT_CONFIG } from './transport/kafka/kafka-config.js';
export type {
  KafkaBrokerAddress,
  KafkaSubscribeOptions,
  KafkaTransportConfig,
} from './transport/kafka/kafka-config.js';
export {
  KAFKA_PREFIX_PATTERN,
  KAFKA_TOPIC_PATTERN,
  KafkaNames,
  kafkaBrokerId,
  ORIGINAL_OFFSET_HEADER,
  ORIGINAL_PARTITION_HEADER,
  ORIGINAL_TOPIC_HEADER,
  RETRY_DUE_HEADER,
  SETTLED_HEADER,
} from './transport/kafka/kafka-names.js';
export { PartitionOffsets } from './transport/kafka/partition-offsets.js';

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
