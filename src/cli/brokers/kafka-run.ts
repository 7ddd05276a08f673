import { namespacedName, namespacedTransport } from '../namespaced-transport.js';
import type { RunTransport } from '../run-transports.js';
import { brokersOfUrl } from '../../transport/kafka/kafka-config.js';
import { firstContact, loadKafkaDriver } from '../../transport/kafka/kafka-driver.js';
import { KafkaTransport } from '../../transport/kafka/kafka-transport.js';
import { SILENT_LOGGER } from '../../core/logger.js';

/** Longest wait for the brokers' first answer when a run looks up their advertised address. */
const DIAL_TIMEOUT_MS = 10_000;

const address = ({ host, port }: { host: string; port: number }): string => `${host}:${port}`;

/**
 * Where a run dials the brokers: a Kafka client connects to the addresses the brokers advertise, not
 * to its bootstrap address, so a run given a proxy in front of a one-broker cluster maps the broker's
 * advertised address to the proxy; otherwise the client would reach the broker around it.
 */
async function dialThrough(url: string): Promise<Record<string, string>> {
  const bootstrap = brokersOfUrl(url).map(address);
  const { Admin } = await loadKafkaDriver();
  const admin = new Admin({ clientId: 'oncemq-run', bootstrapBrokers: bootstrap });
  try {
    const metadata = await firstContact(url, DIAL_TIMEOUT_MS, admin.metadata({ topics: [] }));
    const advertised = [...metadata.brokers.values()].map(address);
    const [only] = advertised;
    const [dial] = bootstrap;
    if (advertised.length !== 1 || only === undefined || dial === undefined || only === dial) return {};
    return { [only]: dial };
  } finally {
    await admin.close();
  }
}

/**
 * Kafka for `oncemq demo` and `oncemq chaos`: the run's topics and consumer group under its namespace
 * (Kafka's names are global to the cluster), retry and dead-letter topics under the namespace too,
 * short failure backoff and retry discovery so that a dropped connection or a killed member costs little.
 */
export const KAFKA_RUN_TRANSPORT = Object.freeze<RunTransport>({
  service: 'kafka',
  cluster: {
    reach: 'list',
    url: (urls) => `kafka://${urls.map((url) => new URL(url).host).join(',')}`,
    leader: async ({ url, namespace }, topic) => {
      const { Admin } = await loadKafkaDriver();
      const admin = new Admin({
        clientId: 'oncemq-run',
        bootstrapBrokers: brokersOfUrl(url).map(address),
        timeout: 5000,
        retries: 0,
      });
      try {
        const name = namespacedName(namespace, topic);
        const metadata = await admin.metadata({ topics: [name] });
        const leader = metadata.topics.get(name)?.partitions[0]?.leader;
        return leader === undefined || leader < 0 ? undefined : String(leader);
      } finally {
        await admin.close();
      }
    },
  },
  open: async ({ url, namespace }) => {
    const transport = new KafkaTransport({
      url,
      prefix: namespace,
      brokerAddresses: await dialThrough(url),
      failureBackoff: '200ms',
      retryDiscoveryInterval: '500ms',
      // A run cuts connections on purpose: their lines would drown its summary.
      logger: SILENT_LOGGER,
    });
    await transport.init();
    return namespacedTransport(transport, namespace);
  },
  cleanup: async ({ url, namespace }, groups) => {
    const { Admin } = await loadKafkaDriver();
    const admin = new Admin({ clientId: 'oncemq-run', bootstrapBrokers: brokersOfUrl(url).map(address) });
    try {
      const topics = (await admin.listTopics()).filter((topic) => topic.startsWith(namespace));
      if (topics.length > 0) await admin.deleteTopics({ topics });
      await admin
        .deleteGroups({ groups: groups.map((group) => namespacedName(namespace, group)) })
        .catch(() => undefined);
    } finally {
      await admin.close();
    }
  },
});
