import { namespacedName, namespacedTransport } from '../namespaced-transport.js';
import { GRPC_PROXY_PARAMETER, type RunTransport } from '../run-transports.js';
import { parseRocketMQUrl } from '../../transport/rocketmq/rocketmq-config.js';
import { RocketMQAdmin } from '../../transport/rocketmq/rocketmq-admin.js';
import { RocketMQTransport } from '../../transport/rocketmq/rocketmq-transport.js';
import { SILENT_LOGGER } from '../../core/logger.js';

/**
 * The run's URL without its gRPC proxy; the proxy, when named, carries every gRPC channel this
 * process makes from now on. gRPC clients take a proxy from the environment only (`grpc_proxy`, read
 * when a channel is made), never per client, and the RocketMQ client makes channels all along (one
 * per route it refreshes), so the whole process goes through it: a chaos member is a process of its
 * own; in the demo the producer's connections are cut too, and the client sends again.
 */
function routeThroughProxy(url: string): string {
  const parsed = new URL(url);
  const proxy = parsed.searchParams.get(GRPC_PROXY_PARAMETER);
  if (proxy === null) return url;
  parsed.searchParams.delete(GRPC_PROXY_PARAMETER);
  process.env.grpc_proxy = proxy;
  return parsed.toString();
}

/**
 * RocketMQ for `oncemq demo` and `oncemq chaos`: the run's topics and group under its namespace
 * (RocketMQ's names are global to the cluster), the proxy's shortest long poll and a short failure
 * backoff so that a dropped connection or a killed member costs little.
 */
export const ROCKETMQ_RUN_TRANSPORT = Object.freeze<RunTransport>({
  service: 'rocketmq',
  route: 'grpc',
  open: async ({ url, namespace, ordered }) => {
    const transport = new RocketMQTransport({
      url: routeThroughProxy(url),
      fifo: ordered === true,
      longPoll: '1s',
      failureBackoff: '200ms',
      requestTimeout: '3s',
      // A run cuts connections on purpose: their lines would drown its summary.
      logger: SILENT_LOGGER,
    });
    await transport.init();
    return namespacedTransport(transport, namespace);
  },
  cleanup: async ({ url, namespace }, groups) => {
    const admin = new RocketMQAdmin(parseRocketMQUrl(url).nameServer);
    // the run's topics, and its groups' retry and dead-letter topics (%RETRY%<group>, %DLQ%<group>)
    const ours = (topic: string): boolean => topic.replace(/^%(RETRY|DLQ)%/, '').startsWith(namespace);
    for (const topic of (await admin.topics()).filter(ours)) await admin.deleteTopic(topic);
    for (const group of groups) await admin.deleteGroup(namespacedName(namespace, group));
  },
});
