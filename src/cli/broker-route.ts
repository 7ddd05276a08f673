import { ConnectProxy } from '../testing/connect-proxy.js';
import { TcpProxy } from '../testing/tcp-proxy.js';
import { resolveServiceUrl } from './connection.js';
import { GRPC_PROXY_PARAMETER, type RunTransport } from './run-transports.js';

/** Ports of the URL schemes a run's broker or database may have, when the URL names none. */
const DEFAULT_PORTS: Readonly<Record<string, number>> = Object.freeze({
  'postgres:': 5432,
  'postgresql:': 5432,
  'mysql:': 3306,
  'amqp:': 5672,
  'amqps:': 5671,
  'nats:': 4222,
  'redis:': 6379,
  'rediss:': 6379,
  'kafka:': 9092,
  'http:': 80,
  'https:': 443,
});

/** The port a service URL names, or its scheme's default; undefined for a path (the local broker's file). */
export function urlPort(url: string): number | undefined {
  if (!URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  const port = Number(parsed.port || DEFAULT_PORTS[parsed.protocol] || 0);
  return port > 0 ? port : undefined;
}

/**
 * The ports a run's members dial to reach the broker: the route's, and the CONNECT proxy a `grpc`
 * route names in its URL.
 */
export function routePorts(route: Pick<BrokerRoute, 'direct' | 'proxied'>): number[] {
  const proxy = URL.canParse(route.proxied)
    ? new URL(route.proxied).searchParams.get(GRPC_PROXY_PARAMETER)
    : null;
  return [route.proxied, route.direct, ...(proxy === null ? [] : [proxy])]
    .map(urlPort)
    .filter((port): port is number => port !== undefined);
}

/** How a run reaches its broker: directly (setup, cleanup) and through a proxy it can cut (the consumers). */
export interface BrokerRoute {
  /** The broker itself, or for the local broker its SQLite file. */
  readonly direct: string;
  /** The same broker through the run's TCP proxy (the local broker's file: there is no connection). */
  readonly proxied: string;
  /** Cuts every connection through the proxy; how many were cut (0 for the local broker). */
  drop(): number;
  close(): Promise<void>;
}

/**
 * Starts a TCP proxy in front of the run's broker (`--url`, else the service's environment variable,
 * else the loopback default), so that the run can drop the consumers' connections without stopping
 * a broker other programs share.
 */
export async function brokerRoute(
  transport: RunTransport,
  localPath: string,
  flag: string | undefined,
): Promise<BrokerRoute> {
  if (transport.service === undefined) {
    const path = flag ?? localPath;
    return { direct: path, proxied: path, drop: () => 0, close: () => Promise.resolve() };
  }
  const direct = resolveServiceUrl(transport.service, flag).url;
  if (transport.route === 'grpc') {
    const connectProxy = await ConnectProxy.start();
    const proxied = new URL(direct);
    proxied.searchParams.set(GRPC_PROXY_PARAMETER, connectProxy.url);
    return {
      direct,
      proxied: proxied.toString(),
      drop: () => connectProxy.drop(),
      close: () => connectProxy.close(),
    };
  }
  const target = new URL(direct);
  const proxy = await TcpProxy.start({
    targetHost: target.hostname.replace(/^\[|\]$/g, ''),
    targetPort: urlPort(direct) ?? 0,
  });
  const proxied = new URL(direct);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  return {
    direct,
    proxied: proxied.toString(),
    drop: () => proxy.dropConnections(),
    close: () => proxy.close(),
  };
}
