import { namespacedName, namespacedTransport } from '../../cli/namespaced-transport.js';
import { GRPC_PROXY_PARAMETER, type RunTransport } from '../../cli/run-transports.js';
import { parseRocketMQUrl } from './rocketmq-config.js';
import { RocketMQAdmin } from './rocketmq-admin.js';
import { RocketMQTransport } from './rocketmq-transport.js';
import type { Transport } from '../transport.js';

/**
 * Opens `transport`'s consumers through `proxy`: gRPC clients take a proxy from the environment only
 * (`grpc_proxy`, read when a channel is made), so it is set while a subscription starts its client —
 * whose channels keep the proxy through every reconnect — and put back after; the transport's
 * producer (publishes, dead letters) makes its channel later, straight to the broker.
 */
function consumingThrough(transport: Transport, proxy: string): Transport {
  let starting = Promise.resolve();
  return {
    ...transport,
    subscribe: (...args) => {
      const next = starting.then(async () => {
        const before = process.env.grpc_proxy;
        process.env.grpc_proxy = proxy;
        try {
          return await transport.subscribe(...args);
        } finally {
          if (before === undefined) delete process.env.grpc_proxy;
          else process.env.grpc_proxy = before;
        }
      });
      starting = next.then(
        () => undefined,
        () => undefined,
      );
      return next;
    },
  };
}

/**
 * RocketMQ for `oncemq demo` and `oncemq chaos`: the run's topics and group under its namespace
 * (RocketMQ's names are global to the cluster), the proxy's shortest long poll and a short failure
 * backoff so that a dropped connection or a killed member costs little.
 */
export const ROCKETMQ_RUN_TRANSPORT = Object.freeze<RunTransport>({
  service: 'rocketmq',
  route: 'grpc',
  open: async ({ url, namespace }) => {
    const parsed = new URL(url);
    const proxy = parsed.searchParams.get(GRPC_PROXY_PARAMETER);
    parsed.searchParams.delete(GRPC_PROXY_PARAMETER);
    const transport = new RocketMQTransport({
      url: parsed.toString(),
      longPoll: '1s',
      failureBackoff: '200ms',
      requestTimeout: '3s',
    });
    await transport.init();
    const named = namespacedTransport(transport, namespace);
    return proxy === null ? named : consumingThrough(named, proxy);
  },
  cleanup: async ({ url, namespace }, groups) => {
    const admin = new RocketMQAdmin(parseRocketMQUrl(url).nameServer);
    // the run's topics, and its groups' retry and dead-letter topics (%RETRY%<group>, %DLQ%<group>)
    const ours = (topic: string): boolean => topic.replace(/^%(RETRY|DLQ)%/, '').startsWith(namespace);
    for (const topic of (await admin.topics()).filter(ours)) await admin.deleteTopic(topic);
    for (const group of groups) await admin.deleteGroup(namespacedName(namespace, group));
  },
});
