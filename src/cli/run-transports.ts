import type { SubscribeOptions, Transport } from '../transport/transport.js';
import { UsageError } from './command.js';
import type { ClusterState } from './cluster-nodes.js';
import type { ServiceName } from './connection.js';

/** Where a run's transport connects, and the names it keeps to. */
export interface RunTransportTarget {
  /** The broker's URL (through the run's proxy), or for the local broker its SQLite file. */
  readonly url: string;
  /** A name made for the run: every queue, stream, subject or key prefix the run creates starts with it. */
  readonly namespace: string;
  /**
   * The run consumes with per-key order: a broker that keeps it only on topics made for it (RocketMQ's
   * FIFO topics and orderly groups) opens its transport so. @default false
   */
  readonly ordered?: boolean;
  /**
   * Nodes of the clustered broker the run is on (`oncemq chaos --cluster`): a broker whose streams or
   * topics have a replica count oncemq sets makes them with this many. @default 1
   */
  readonly replicas?: number;
}

/** How a run reaches a three-node cluster and finds the node a node failure should hit. */
export interface RunClusterSupport {
  /**
   * `list`: the client takes every node's URL and moves to a surviving node itself (`url` joins them);
   * `balancer`: the client takes one URL, a TCP balancer in front of the nodes (the run's proxy) spreads
   * connections over them and skips a node that refuses.
   */
  readonly reach: 'list' | 'balancer';
  /** One URL naming every node (reach `list`). */
  url?(urls: readonly string[]): string;
  /**
   * The node leading the run's stream / quorum queue / partition of `topic` for `group`, by the name
   * the broker gives it; undefined when none leads (an election under way).
   */
  leader(
    target: RunTransportTarget,
    topic: string,
    group: string,
    cluster: ClusterState,
  ): Promise<string | undefined>;
}

/**
 * A transport `oncemq demo --transport` and `oncemq chaos` run on. Each entry loads its driver only
 * when chosen; adding a broker is one entry here and one small file beside its adapter.
 */
export interface RunTransport {
  /**
   * The broker server, reached through a TCP proxy the run drops connections of; `undefined` for the
   * local broker, which has no connection to drop (its processes share one SQLite file).
   */
  readonly service?: ServiceName;
  /**
   * How the run cuts the consumers' connections: `tcp`, a TCP proxy in front of the broker (the
   * consumers' URL is the proxy's); `grpc`, an HTTP CONNECT proxy the consumers' gRPC channels go
   * through, named by the URL's {@link GRPC_PROXY_PARAMETER} (a broker whose routes name its own
   * address, which a TCP proxy on another port would see only the first request of). @default 'tcp'
   */
  readonly route?: 'tcp' | 'grpc';
  /**
   * How often a run consuming in per-key order cuts the consumers' connections. A broker whose ordered
   * partitions resume after a cut only once the cut's copies come back (NATS: one ack wait) needs
   * longer than the default, or no partition ever gets past its take-over. @default 1500
   */
  readonly orderedDropEveryMs?: number;
  /** How runs use a three-node cluster of this broker; undefined: no cluster runs. */
  readonly cluster?: RunClusterSupport;
  /** Opens a transport on the run's names, creating its topology as it subscribes and publishes. */
  open(target: RunTransportTarget): Promise<Transport>;
  /**
   * Deletes what the run created on the broker (queues, exchanges, streams, keys of its namespace),
   * on a direct connection; `url` is the broker itself, not the proxy.
   */
  cleanup(target: RunTransportTarget, groups: readonly string[]): Promise<void>;
}

/** Parameter of a run's broker URL naming the HTTP CONNECT proxy of a `grpc` route. */
export const GRPC_PROXY_PARAMETER = 'grpcProxy';

const RUN_TRANSPORTS: Readonly<Record<string, () => Promise<RunTransport>>> = Object.freeze({
  local: async () => (await import('./brokers/local-run.js')).LOCAL_RUN_TRANSPORT,
  rabbitmq: async () => (await import('./brokers/rabbitmq-run.js')).RABBIT_RUN_TRANSPORT,
  nats: async () => (await import('./brokers/nats-run.js')).NATS_RUN_TRANSPORT,
  'redis-streams': async () => (await import('./brokers/redis-streams-run.js')).REDIS_STREAMS_RUN_TRANSPORT,
  kafka: async () => (await import('./brokers/kafka-run.js')).KAFKA_RUN_TRANSPORT,
  rocketmq: async () => (await import('./brokers/rocketmq-run.js')).ROCKETMQ_RUN_TRANSPORT,
  sqs: async () => (await import('./brokers/sqs-run.js')).SQS_RUN_TRANSPORT,
});

/**
 * How runs subscribe: a short visibility, so that a copy whose ack a dropped connection lost comes
 * back in seconds rather than the default 30 s (handlers are short; keep-alive covers a slow one).
 */
export const RUN_SUBSCRIBE: SubscribeOptions = Object.freeze({ visibility: '5s' });

/** Names `demo --transport` and `chaos --transport` accept. */
export const RUN_TRANSPORT_NAMES: readonly string[] = Object.freeze(Object.keys(RUN_TRANSPORTS));

/** The run transport `name`, or a usage error listing the names. */
export async function runTransport(name: string): Promise<RunTransport> {
  const load = RUN_TRANSPORTS[name];
  if (load === undefined) {
    throw new UsageError(`--transport '${name}' is not available; use ${RUN_TRANSPORT_NAMES.join(', ')}`);
  }
  return load();
}
