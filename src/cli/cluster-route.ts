import { TcpProxy } from '../testing/tcp-proxy.js';
import type { BrokerRoute } from './broker-route.js';
import type { ClusterState } from './cluster-nodes.js';
import type { RunClusterSupport } from './run-transports.js';

/** A TCP balancer over every node of the cluster; the URL is the first node's with the balancer's port. */
async function balancer(state: ClusterState): Promise<{ proxy: TcpProxy; url: string }> {
  const [first, ...others] = state.urls.map((url) => new URL(url));
  if (first === undefined) throw new Error('the cluster has no node');
  const proxy = await TcpProxy.start({
    targetHost: first.hostname,
    targetPort: Number(first.port),
    moreTargets: others.map((url) => ({ host: url.hostname, port: Number(url.port) })),
  });
  const url = new URL(first);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return { proxy, url: url.toString() };
}

/**
 * How a chaos run reaches a three-node cluster. A client that takes every node's URL gets them all
 * (consumers and producer alike) and finds a surviving node itself; there is no proxy to cut, the
 * node failures are the cuts. A client of one URL reaches the nodes through balancers (one for the
 * harness, one for the members, whose connections the run still cuts).
 */
export async function clusterRoute(support: RunClusterSupport, state: ClusterState): Promise<BrokerRoute> {
  if (support.reach === 'list') {
    const url = support.url?.(state.urls) ?? state.urls.join(',');
    return { direct: url, proxied: url, drop: () => 0, close: () => Promise.resolve() };
  }
  const harness = await balancer(state);
  const members = await balancer(state);
  return {
    direct: harness.url,
    proxied: members.url,
    drop: () => members.proxy.dropConnections(),
    close: async () => {
      await members.proxy.close();
      await harness.proxy.close();
    },
  };
}
