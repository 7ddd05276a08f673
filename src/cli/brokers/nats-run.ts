import type { RunTransport } from '../run-transports.js';
import { loadDriver } from '../stores.js';
import type { jetstreamManager as jetstreamManagerOf } from '@nats-io/jetstream';
import { NatsTransport } from '../../transport/nats/nats-transport.js';
import { SILENT_LOGGER } from '../../core/logger.js';

/** Stream names are upper case by convention: the namespace's stream prefix. */
const streamPrefix = (namespace: string): string => namespace.toUpperCase().replace(/[^A-Z0-9_]/g, '_');

type Manager = Awaited<ReturnType<typeof jetstreamManagerOf>>;

/** Runs `use` with a JetStream manager on a connection of its own to `url` (one server or several, comma-separated). */
async function withManager<T>(url: string, use: (jsm: Manager) => Promise<T>): Promise<T> {
  const { connect } = await loadDriver(() => import('@nats-io/transport-node'), '@nats-io/transport-node');
  const { jetstreamManager } = await loadDriver(() => import('@nats-io/jetstream'), '@nats-io/jetstream');
  const connection = await connect({ servers: url.split(','), timeout: 3000 });
  try {
    return await use(await jetstreamManager(connection, { timeout: 3000 }));
  } finally {
    await connection.close();
  }
}

/**
 * NATS JetStream for `oncemq demo` and `oncemq chaos`: streams and subjects under the run's
 * namespace, short pulls and a short failure backoff so a dropped connection costs little.
 */
export const NATS_RUN_TRANSPORT = Object.freeze<RunTransport>({
  service: 'nats',
  // An ordered partition taken over after a cut waits out its copies' ack wait (the runs' visibility,
  // 5 s) and a second before it pulls again (docs/transports/nats.md, "The take-over fence"): cuts
  // every 1.5 s would leave it no time between two of them.
  orderedDropEveryMs: 12_000,
  cluster: {
    reach: 'list',
    url: (urls) => urls.join(','),
    leader: async ({ url, namespace }, topic) =>
      withManager(url, async (jsm) => {
        const info = await jsm.streams.info(`${streamPrefix(namespace)}_${topic}`);
        return info.cluster?.leader;
      }),
  },
  open: async ({ url, namespace, replicas }) => {
    const transport = new NatsTransport({
      servers: url.split(','),
      replicas: replicas ?? 1,
      streamPrefix: streamPrefix(namespace),
      subjectPrefix: namespace,
      pullExpires: '1s',
      failureBackoff: '200ms',
      requestTimeout: '2s',
      // A run cuts connections on purpose: their lines would drown its summary.
      logger: SILENT_LOGGER,
    });
    await transport.init();
    return transport;
  },
  cleanup: async ({ url, namespace }) => {
    await withManager(url, async (jsm) => {
      const prefix = streamPrefix(namespace);
      const doomed: string[] = [];
      for await (const name of jsm.streams.names()) if (name.startsWith(prefix)) doomed.push(name);
      for (const name of doomed) await jsm.streams.delete(name);
    });
  },
});
