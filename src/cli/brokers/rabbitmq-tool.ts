import { resolveServiceUrl } from '../connection.js';
import type { ToolTransportOptions } from '../transports.js';
import { RabbitTransport } from '../../transport/rabbitmq/rabbitmq-transport.js';

/**
 * Opens RabbitMQ for a tool (`oncemq dlq --transport rabbitmq`): topology `check`, so nothing is
 * declared and a missing queue is an error. The URL comes from `--url`, else `ONCEMQ_RABBITMQ_URL`,
 * else the loopback default; its query may name the transport's `prefix` and `exchange`
 * (`amqp://host?prefix=orders`), which are taken off before connecting.
 */
export async function openRabbitForTool(options: ToolTransportOptions): Promise<RabbitTransport> {
  const url = new URL(resolveServiceUrl('rabbitmq', options.url).url);
  const prefix = url.searchParams.get('prefix') ?? undefined;
  const exchange = url.searchParams.get('exchange') ?? undefined;
  url.searchParams.delete('prefix');
  url.searchParams.delete('exchange');
  const transport = new RabbitTransport({
    url: url.toString(),
    topology: 'check',
    ...(prefix === undefined ? {} : { prefix }),
    ...(exchange === undefined ? {} : { exchange }),
  });
  await transport.init();
  return transport;
}
