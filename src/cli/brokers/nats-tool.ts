import { NatsTransport } from '../../transport/nats/nats-transport.js';

/**
 * Opens NATS for a tool (`oncemq dlq --transport nats`): topology `check`, so nothing is created; a
 * missing stream is a `ConfigError` naming it.
 */
export async function openNatsForTool(servers: string): Promise<NatsTransport> {
  const transport = new NatsTransport({ servers, topology: 'check' });
  try {
    await transport.init();
  } catch (error) {
    await transport.close();
    throw error;
  }
  return transport;
}
