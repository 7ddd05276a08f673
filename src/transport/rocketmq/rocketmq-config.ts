import { parseDuration, type Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { wholeNumber } from '../config-checks.js';
import { toLogger, type Logger, type LoggerLike } from '../../core/logger.js';
import { TransportNamespace } from '../namespace.js';

/** Input of `new RocketMQTransport(config)`: the proxy and name server, topic kind, and timings. */
export interface RocketMQTransportConfig {
  /**
   * The proxy's gRPC endpoint as a URL, `rocketmq://host:8081`; `?namesrv=host:port` names the name
   * server (default: port 9876 on the proxy's host), `?namespace=` the application's namespace
   * (as `namespace`). @default 'rocketmq://127.0.0.1:8081'
   */
  readonly url?: string;
  /**
   * The application's namespace on the cluster. RocketMQ's topics and groups belong to the cluster,
   * so two applications using topic `orders` and group `points` share them; with a namespace they are
   * `<namespace>|orders` and `<namespace>|points` at the broker (the group's `%RETRY%` and `%DLQ%`
   * topics follow: `%DLQ%<namespace>|points`), while envelopes, receipts and dead letters keep the
   * names the application uses. @default the url's `?namespace=`, else none
   */
  readonly namespace?: string;
  /**
   * `create`: topics (with the message type they need), subscription groups (with `retryMaxTimes`) and
   * the groups' `%DLQ%<group>` topics are created when missing, through the name server and the
   * brokers' admin requests. `check`: nothing is created; a missing one is a `ConfigError` naming it
   * (what the CLI tools use). @default 'create'
   */
  readonly topology?: 'create' | 'check';
  /**
   * Topics are FIFO topics and groups are orderly: every message goes to a message group (its ordering
   * key, else a group of its own), and `subscribe(…, { ordering })` keeps per-key order. A topic
   * accepts one message type, so a transport is FIFO or not for all its topics. @default false
   */
  readonly fifo?: boolean;
  /** Queues of a topic the transport creates. @default 8 */
  readonly queues?: number;
  /** Longest wait for one request (a send, an ack, a visibility change). @default '5s' */
  readonly requestTimeout?: Duration;
  /**
   * How long one receive waits at the proxy for messages (its long poll); the proxy refuses less than
   * its `grpcClientConsumerMinLongPollingTimeoutMillis` (5s by default). @default '5s'
   */
  readonly longPoll?: Duration;
  /**
   * The group's `retryMaxTimes` (redeliveries before the broker moves a message to `%DLQ%<group>`)
   * when the transport creates the group. Unset: the processor's retry policy's most reconsumes, plus
   * `RETRY_MAX_TIMES_GRACE`, so that oncemq dead-letters a message with its reason first.
   */
  readonly retryMaxTimes?: number;
  /** Wait before receiving again after a receive failed. @default '1s' */
  readonly failureBackoff?: Duration;
  /**
   * Where the client's lines, created topics and groups and failures are logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** A proxy on this machine, at the proxy's default gRPC port. */
export const DEFAULT_ROCKETMQ_URL = 'rocketmq://127.0.0.1:8081';

/** Defaults of the {@link RocketMQTransportConfig} fields that have a fixed one. */
export const DEFAULT_ROCKETMQ_TRANSPORT_CONFIG = Object.freeze({
  /** {@link DEFAULT_ROCKETMQ_URL}. */
  url: DEFAULT_ROCKETMQ_URL,
  /** Topics and groups are created. */
  topology: 'create',
  /** Normal (not FIFO) topics. */
  fifo: false,
  /** Queues of a topic the transport creates. */
  queues: 8,
  /** Longest wait for one request. */
  requestTimeout: '5s',
  /** How long one receive waits at the proxy. */
  longPoll: '5s',
  /** Wait before receiving again after a failed receive. */
  failureBackoff: '1s',
} as const);

/** Redeliveries the broker still makes past the retry policy's last one: a copy whose consumer died on its last delivery can still be dead-lettered with a reason. */
export const RETRY_MAX_TIMES_GRACE = 3;

/** The broker's default `retryMaxTimes`, used when neither the config nor the processor says. */
export const ROCKETMQ_DEFAULT_RETRY_MAX_TIMES = 16;

/** The proxy's smallest invisible duration for a receive here is 1s (10s by default): visibility is rounded up to it. */
export const MIN_INVISIBLE_MS = 1000;

/** The configuration, checked. */
export interface RocketMQSettings {
  readonly endpoints: string;
  readonly nameServer: string;
  /** The application's namespace: its topics and groups at the broker. */
  readonly names: TransportNamespace;
  readonly topology: 'create' | 'check';
  readonly fifo: boolean;
  readonly queues: number;
  readonly requestTimeoutMs: number;
  readonly longPollMs: number;
  readonly retryMaxTimes: number | undefined;
  readonly failureBackoffMs: number;
  readonly logger: Logger;
}

/** Reads a `rocketmq://` URL into the proxy's endpoint, the name server and the namespace. */
export function parseRocketMQUrl(text: string): {
  /** The proxy's gRPC endpoint, `host:port` (port 8081 when the URL names none). */
  endpoints: string;
  /** The name server, `host:port`: `?namesrv=`, else port 9876 on the proxy's host. */
  nameServer: string;
  /** The application's namespace: `?namespace=`, else empty. */
  namespace: string;
} {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError('url', `'${text}' is not a URL; expected rocketmq://host:8081?namesrv=host:9876`);
  }
  if (url.protocol !== 'rocketmq:') {
    throw new ConfigError('url', `expected a rocketmq:// URL, got ${url.protocol}//`);
  }
  const port = url.port === '' ? '8081' : url.port;
  return {
    endpoints: `${url.hostname}:${port}`,
    nameServer: url.searchParams.get('namesrv') ?? `${url.hostname}:9876`,
    namespace: url.searchParams.get('namespace') ?? '',
  };
}

export function resolveRocketMQSettings(config: RocketMQTransportConfig): RocketMQSettings {
  const d = DEFAULT_ROCKETMQ_TRANSPORT_CONFIG;
  const topology = config.topology ?? d.topology;
  if (!(['create', 'check'] as unknown[]).includes(topology)) {
    throw new ConfigError('topology', `expected 'create' or 'check', got ${JSON.stringify(topology)}`);
  }
  const longPollMs = parseDuration(config.longPoll ?? d.longPoll, 'longPoll');
  if (longPollMs < 1000)
    throw new ConfigError('longPoll', 'must be at least 1s (the proxy refuses shorter long polls)');
  const { endpoints, nameServer, namespace: inUrl } = parseRocketMQUrl(config.url ?? d.url);
  const namespace = config.namespace ?? (inUrl === '' ? undefined : inUrl);
  return Object.freeze({
    endpoints,
    nameServer,
    // Not RocketMQ's own `<namespace>%<name>`: the 5.5 proxy takes everything up to a `%` in a topic for
    // a namespace and drops it from the topics it hands out, and fails the acks of a group named so.
    names: new TransportNamespace(namespace, '|'),
    topology,
    fifo: config.fifo ?? d.fifo,
    queues: wholeNumber(config.queues ?? d.queues, 'queues', 1),
    requestTimeoutMs: parseDuration(config.requestTimeout ?? d.requestTimeout, 'requestTimeout'),
    longPollMs,
    retryMaxTimes:
      config.retryMaxTimes === undefined ? undefined : wholeNumber(config.retryMaxTimes, 'retryMaxTimes', 0),
    failureBackoffMs: parseDuration(config.failureBackoff ?? d.failureBackoff, 'failureBackoff'),
    logger: toLogger(config.logger),
  });
}
