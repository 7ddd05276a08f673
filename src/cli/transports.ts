import type { Transport } from '../transport/transport.js';
import { UsageError } from './command.js';
import { resolveServiceUrl } from './connection.js';

/** What the CLI's inspecting tools need to reach one transport: where it is, and that nothing is created. */
export interface ToolTransportOptions {
  /** `--url` (a broker URL), or for the local broker its SQLite file. */
  readonly url?: string | undefined;
}

/**
 * Opens a transport for a tool (`oncemq dlq`): it never creates a file, table, queue or stream; one
 * that is not there is an error. Each transport's entry loads its driver only when chosen.
 */
export type ToolTransportOpener = (options: ToolTransportOptions) => Promise<Transport>;

const OPENERS: Readonly<Record<string, ToolTransportOpener>> = Object.freeze({
  local: async ({ url }) => {
    const { LocalBroker } = await import('../transport/local/local-transport.js');
    const { DEFAULT_LOCAL_BROKER_CONFIG } = await import('../transport/local/local-config.js');
    const broker = new LocalBroker({ path: url ?? DEFAULT_LOCAL_BROKER_CONFIG.path, migrate: false });
    await broker.init();
    return broker;
  },
  nats: async ({ url }) =>
    (await import('./brokers/nats-tool.js')).openNatsForTool(resolveServiceUrl('nats', url).url),
  rabbitmq: async (options) => (await import('./brokers/rabbitmq-tool.js')).openRabbitForTool(options),
  kafka: async ({ url }) =>
    (await import('./brokers/kafka-tool.js')).openKafkaForTool(resolveServiceUrl('kafka', url).url),
  'redis-streams': async ({ url }) =>
    (await import('./brokers/redis-streams-tool.js')).openRedisStreamsForTool(url),
  rocketmq: async ({ url }) =>
    (await import('./brokers/rocketmq-tool.js')).openRocketMQForTool(resolveServiceUrl('rocketmq', url).url),
  sqs: async ({ url }) =>
    (await import('./brokers/sqs-tool.js')).openSqsForTool(resolveServiceUrl('sqs', url).url),
});

/** Names `--transport` accepts. */
export const TRANSPORT_NAMES: readonly string[] = Object.freeze(Object.keys(OPENERS));

/** Opens `name` for a tool, or says which names exist. */
export function openToolTransport(name: string, options: ToolTransportOptions): Promise<Transport> {
  const opener = OPENERS[name];
  if (opener === undefined) {
    throw new UsageError(`unknown transport '${name}'; use one of ${TRANSPORT_NAMES.join(', ')}`);
  }
  return opener(options);
}

/**
 * Opens a dead-letter queue named by `--queue` for a tool: a queue that a broker's own redrive fills,
 * not a group's. SQS only (a redrive policy's dead-letter queue); nothing is created.
 */
export async function openToolQueue(
  name: string,
  options: ToolTransportOptions & { readonly queue: string },
): Promise<Pick<Transport, 'deadLetters' | 'close'>> {
  if (name !== 'sqs') throw new UsageError(`--queue is for --transport sqs only, not ${name}`);
  const { openSqsQueueForTool } = await import('./brokers/sqs-tool.js');
  return openSqsQueueForTool(resolveServiceUrl('sqs', options.url).url, options.queue);
}
