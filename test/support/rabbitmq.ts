import { randomBytes } from 'node:crypto';
import amqplib from 'amqplib';
import { RabbitTransport, type RabbitTransportConfig } from 'oncemq/rabbitmq';
import { TcpProxy } from 'oncemq/testing';
import { findService, type Service } from './services.js';

/** The RabbitMQ service of the integration suites (ONCEMQ_RABBITMQ_URL, else the loopback default). */
export function findRabbit(): Promise<Service> {
  return findService({
    variable: 'ONCEMQ_RABBITMQ_URL',
    defaultUrl: 'amqp://guest:guest@127.0.0.1:5672',
  });
}

/** A prefix of its own for one test (the exchange follows it): its queues never meet another test's. */
export function scratchPrefix(): string {
  return `oncemq-t-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** `url` with its host and port replaced by the proxy's. */
export function throughProxy(url: string, proxy: TcpProxy): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(proxy.port);
  return parsed.toString();
}

/** Deletes queues and exchanges on a connection of its own (a test's leftovers). */
export async function deleteTopology(
  url: string,
  names: { readonly queues: Iterable<string>; readonly exchanges: Iterable<string> },
): Promise<void> {
  const connection = await amqplib.connect(url);
  try {
    for (const queue of names.queues) {
      const channel = await connection.createChannel();
      channel.on('error', () => undefined);
      await channel.deleteQueue(queue).catch(() => undefined);
      await channel.close().catch(() => undefined);
    }
    for (const exchange of names.exchanges) {
      const channel = await connection.createChannel();
      channel.on('error', () => undefined);
      await channel.deleteExchange(exchange).catch(() => undefined);
      await channel.close().catch(() => undefined);
    }
  } finally {
    await connection.close();
  }
}

/** A transport reaching RabbitMQ through a proxy of its own, on a prefix (and so an exchange) of its own. */
export interface RabbitWorld {
  readonly proxy: TcpProxy;
  readonly prefix: string;
  readonly transport: RabbitTransport;
  /** Another transport on the same names and proxy (another process's). */
  open(config?: RabbitTransportConfig): RabbitTransport;
  /** Closes every transport opened here, deletes what they declared, stops the proxy. */
  cleanup(): Promise<void>;
}

export async function rabbitWorld(url: string, config: RabbitTransportConfig = {}): Promise<RabbitWorld> {
  const target = new URL(url);
  const proxy = await TcpProxy.start({
    targetHost: target.hostname,
    targetPort: Number(target.port || 5672),
  });
  const prefix = scratchPrefix();
  const transports: RabbitTransport[] = [];
  const open = (extra: RabbitTransportConfig = {}): RabbitTransport => {
    const transport = new RabbitTransport({
      url: throughProxy(url, proxy),
      // The exchange follows the prefix, as it does for an application that sets only a prefix.
      prefix,
      reconnectDelay: '50ms',
      maxReconnectDelay: '500ms',
      failureBackoff: '100ms',
      ...config,
      ...extra,
    });
    transports.push(transport);
    return transport;
  };
  const transport = open();
  return {
    proxy,
    prefix,
    transport,
    open,
    cleanup: async () => {
      await Promise.all(transports.map((t) => t.close()));
      const queues = new Set(transports.flatMap((t) => [...t.declared.queues]));
      const exchanges = new Set(transports.flatMap((t) => [...t.declared.exchanges]));
      await deleteTopology(url, { queues, exchanges });
      await proxy.close();
    },
  };
}
