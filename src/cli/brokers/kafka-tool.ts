import { KafkaTransport } from '../../transport/kafka/kafka-transport.js';

/**
 * Opens Kafka for a tool (`oncemq dlq --transport kafka`): topology `check`, so nothing is created; a
 * group without a dead-letter topic is an error naming it. The key prefix comes from the URL's
 * `prefix` parameter (`kafka://host:9092?prefix=myapp`), else `oncemq`; the application's namespace
 * from its `namespace` parameter, else none.
 */
export async function openKafkaForTool(url: string): Promise<KafkaTransport> {
  const parsed = /^([^?#]*)(?:\?([^#]*))?/.exec(url);
  const query = new URLSearchParams(parsed?.[2] ?? '');
  const prefix = query.get('prefix');
  const namespace = query.get('namespace');
  const transport = new KafkaTransport({
    url: parsed?.[1] ?? url,
    topology: 'check',
    ...(prefix === null ? {} : { prefix }),
    ...(namespace === null ? {} : { namespace }),
  });
  try {
    await transport.init();
  } catch (error) {
    await transport.close();
    throw error;
  }
  return transport;
}
