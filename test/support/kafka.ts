import { randomUUID } from 'node:crypto';
import { TcpProxy } from 'oncemq/testing';
import { KafkaTransport, type KafkaTransportConfig } from 'oncemq/kafka';
import { Admin } from '@platformatic/kafka';
import { sleep } from './points.js';

/**
 * A Kafka transport whose every connection goes through a TCP proxy: the bootstrap address is the
 * proxy, and the broker's advertised address is mapped to the proxy too (`brokerAddresses`), so that
 * dropping the proxy's connections drops every connection of the transport.
 */
export interface ProxiedKafka {
  readonly transport: KafkaTransport;
  readonly proxy: TcpProxy;
  readonly prefix: string;
  /** Cuts every connection of the transport and its subscriptions. */
  dropConnections(): Promise<void>;
  /** Closes the transport and the proxy, and deletes the topics of its prefix. */
  close(): Promise<void>;
}

/** An admin client straight to the broker, for looking at and cleaning up topics. */
export function kafkaAdmin(bootstrap: string): Admin {
  return new Admin({ clientId: 'oncemq-test-admin', bootstrapBrokers: [bootstrap] });
}

/** Deletes the topics whose names start with one of `prefixes`. */
export async function deleteTopics(bootstrap: string, prefixes: readonly string[]): Promise<void> {
  const admin = kafkaAdmin(bootstrap);
  try {
    const topics = (await admin.listTopics()).filter((topic) =>
      prefixes.some((prefix) => topic.startsWith(prefix)),
    );
    if (topics.length > 0) await admin.deleteTopics({ topics });
  } finally {
    await admin.close();
  }
}

export async function proxiedKafka(
  bootstrap: string,
  config: Omit<KafkaTransportConfig, 'url' | 'brokers' | 'brokerAddresses'> = {},
): Promise<ProxiedKafka> {
  const [host, port] = bootstrap.split(':') as [string, string];
  const proxy = await TcpProxy.start({ targetHost: host, targetPort: Number(port) });
  const prefix = `oncemq-test-${randomUUID().slice(0, 8)}`;
  const transport = new KafkaTransport({
    prefix,
    failureBackoff: '200ms',
    retryDiscoveryInterval: '500ms',
    ...config,
    brokers: [`127.0.0.1:${proxy.port}`],
    brokerAddresses: { [bootstrap]: `127.0.0.1:${proxy.port}` },
  });
  return {
    transport,
    proxy,
    prefix,
    async dropConnections() {
      proxy.dropConnections();
      await sleep(50);
    },
    async close() {
      await transport.close();
      await proxy.close();
      await deleteTopics(bootstrap, [`${prefix}.`]).catch(() => undefined);
    },
  };
}
