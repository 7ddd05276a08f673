import type { Transport } from '../../transport/transport.js';
import { RocketMQTransport } from '../../transport/rocketmq/rocketmq-transport.js';

/** The RocketMQ transport for `oncemq dlq`: topology `check`, so a missing group or topic is an error and nothing is created. */
export async function openRocketMQForTool(url: string): Promise<Transport> {
  const transport = new RocketMQTransport({ url, topology: 'check' });
  await transport.init();
  return transport;
}
