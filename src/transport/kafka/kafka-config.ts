import { hostname } from 'node:os';
import type { Duration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import { toLogger, type Logger, type LoggerLike } from '../../core/logger.js';
import { durationMs, wholeNumber } from '../config-checks.js';
import type { CheckedSubscribe } from '../subscribe-options.js';
import type { StartPosition, SubscribeOptions } from '../transport.js';
import { KafkaNames } from './kafka-names.js';
import { TransportNamespace } from '../namespace.js';

/** Input of `new KafkaTransport(config)`: the brokers, the names of the group topics, and timings. */
export interface KafkaTransportConfig {
  /**
   * The bootstrap brokers as a URL, `kafka://host:9092` (several: `kafka://h1:9092,h2:9092`). One of
   * `url` and `brokers` is required.
   */
  readonly url?: string;
  /** The bootstrap brokers, `host:port` each; used instead of `url`. */
  readonly brokers?: readonly string[];
  /** The Kafka client id of every connection. @default 'oncemq' */
  readonly clientId?: string;
  /** First word of the group's retry and dead-letter topics: `<prefix>.<group>.retry.<delayMs>`, `<prefix>.<group>.dlt`. @default 'oncemq' */
  readonly prefix?: string;
  /**
   * The application's namespace on the cluster. Kafka's topics and consumer groups belong to the
   * cluster, so two applications using topic `orders` and group `points` share them; with a namespace
   * they are `<namespace>.orders` and `<namespace>.points` at the broker (the group's retry and
   * dead-letter topics follow: `<prefix>.<namespace>.points.…`), while envelopes, receipts and dead
   * letters keep the names the application uses. @default none: names are the broker's as they are
   */
  readonly namespace?: string;
  /**
   * `create`: missing topics (published to, subscribed, retry tiers, dead-letter topics) are created
   * with `partitions` partitions. `check`: nothing is created; a missing topic is a `ConfigError`
   * naming it (what the CLI tools use). @default 'create'
   */
  readonly topology?: 'create' | 'check';
  /** Partitions of the topics the transport creates. @default 4 */
  readonly partitions?: number;
  /**
   * The largest record the dead-letter topics take: their `max.message.bytes` (Kafka's default,
   * 1048588). A dead letter over it is stored cut (docs/transports/dead-letters.md) instead of being
   * refused (MESSAGE_TOO_LARGE) on every delivery while its partition waits. @default 1048588
   */
  readonly maxMessageBytes?: number;
  /** Longest wait for one request (a publish's confirm, a commit). @default '10s' */
  readonly timeout?: Duration;
  /** Wait before a delivery whose processor threw, or whose settle failed, is processed again. @default '1s' */
  readonly failureBackoff?: Duration;
  /** How often a subscription looks for retry tiers its group's other members created. @default '5s' */
  readonly retryDiscoveryInterval?: Duration;
  /**
   * Most bytes one fetch of a member brings, and one partition's part of it (the broker still sends a
   * record batch larger than this whole, so a large record never stalls the partition). The client
   * decodes a fetch in one go on the event loop: the bound keeps a backlog from blocking the process
   * while thousands of records are decoded, and lets the first records' work start while the next
   * fetch is on its way (a 30,000-record backlog: the first effect after ~50 ms instead of ~350 ms
   * with the client's 10 MiB). @default 1 MiB
   */
  readonly fetchMaxBytes?: number;
  /** The group session timeout: a member silent this long leaves the group. @default '10s' */
  readonly sessionTimeout?: Duration;
  /** Heartbeats to the group coordinator, sent apart from processing. @default '1s' */
  readonly heartbeatInterval?: Duration;
  /**
   * Addresses to dial instead of the ones the brokers advertise, `advertised host:port` → `host:port`
   * (a TCP proxy, a tunnel, a port forward). Kafka clients connect to the address each broker
   * advertises in its metadata, not to the bootstrap address: without this, a client given a proxy as
   * bootstrap reaches the brokers around it. @default none
   */
  readonly brokerAddresses?: Readonly<Record<string, string>>;
  /**
   * Where rebalances, created topics and failures are logged.
   * Takes `console`, pino, any `{ warn, error }` logger, or `SILENT_LOGGER`.
   * @default DEFAULT_LOGGER (warnings and errors to stderr, rate-limited)
   */
  readonly logger?: LoggerLike;
}

/** Defaults of the {@link KafkaTransportConfig} fields that have a fixed one. */
export const DEFAULT_KAFKA_TRANSPORT_CONFIG = Object.freeze({
  /** The client id of every connection. */
  clientId: 'oncemq',
  /** First word of the group topics. */
  prefix: 'oncemq',
  /** Missing topics are created. */
  topology: 'create',
  /** Partitions of the topics the transport creates. */
  partitions: 4,
  /** Kafka's default `max.message.bytes`. */
  maxMessageBytes: 1_048_588,
  /** Longest wait for one request. */
  timeout: '10s',
  /** Wait before a delivery whose processor threw is processed again. */
  failureBackoff: '1s',
  /** How often a subscription looks for new retry tiers. */
  retryDiscoveryInterval: '5s',
  /** The group session timeout. */
  sessionTimeout: '10s',
  /** Heartbeats to the group coordinator. */
  heartbeatInterval: '1s',
  /** Most bytes of one fetch: 1 MiB. */
  fetchMaxBytes: 1024 * 1024,
} as const);

/** A broker address. */
export interface KafkaBrokerAddress {
  /** Host name or IP address. */
  readonly host: string;
  /** TCP port. */
  readonly port: number;
}

/** The configuration, checked, in milliseconds. */
export interface KafkaSettings {
  readonly brokers: readonly KafkaBrokerAddress[];
  readonly clientId: string;
  readonly names: KafkaNames;
  /** The application's namespace: its topics and groups at the broker. */
  readonly namespace: TransportNamespace;
  readonly topology: 'create' | 'check';
  readonly partitions: number;
  readonly maxMessageBytes: number;
  readonly timeoutMs: number;
  readonly failureBackoffMs: number;
  readonly retryDiscoveryMs: number;
  readonly sessionTimeoutMs: number;
  readonly heartbeatMs: number;
  readonly fetchMaxBytes: number;
  readonly brokerAddresses: ReadonlyMap<string, KafkaBrokerAddress>;
  readonly logger: Logger;
}

/** Parses `host:port` (a bare host takes port 9092). */
export function parseBrokerAddress(text: string, field: string): KafkaBrokerAddress {
  const match = /^\[?([^\]\s/]+?)\]?(?::(\d{1,5}))?$/.exec(text.trim());
  const port = Number(match?.[2] ?? 9092);
  if (match === null || port < 1 || port > 65535) {
    throw new ConfigError(field, `${JSON.stringify(text)} is not host:port`);
  }
  return { host: match[1] as string, port };
}

/** The bootstrap brokers of a `kafka://h1:9092,h2:9092` URL. */
export function brokersOfUrl(url: string): KafkaBrokerAddress[] {
  const match = /^kafka:\/\/([^/?#]+)\/?(?:[?#].*)?$/.exec(url);
  if (match === null) {
    throw new ConfigError(
      'url',
      `${JSON.stringify(url)} is not a Kafka URL; use kafka://host:9092[,host:9092]`,
    );
  }
  return (match[1] as string).split(',').map((part) => parseBrokerAddress(part, 'url'));
}

/** Checks a configuration and freezes it; a bad value fails here, at construction. */
export function resolveKafkaSettings(config: KafkaTransportConfig): KafkaSettings {
  const d = DEFAULT_KAFKA_TRANSPORT_CONFIG;
  let brokers: KafkaBrokerAddress[];
  if (config.brokers !== undefined && config.brokers.length > 0) {
    brokers = config.brokers.map((broker) => parseBrokerAddress(broker, 'brokers'));
  } else if (typeof config.url === 'string') {
    brokers = brokersOfUrl(config.url);
  } else {
    throw new ConfigError('url', 'pass { url: "kafka://host:9092" } or { brokers: ["host:9092"] }');
  }
  const topology: string = config.topology ?? d.topology;
  if (topology !== 'create' && topology !== 'check') {
    throw new ConfigError('topology', `expected 'create' or 'check', got ${JSON.stringify(topology)}`);
  }
  const clientId = config.clientId ?? d.clientId;
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(clientId)) {
    throw new ConfigError(
      'clientId',
      `${JSON.stringify(clientId)} must be 1 to 100 letters, digits, '.', '_' or '-'`,
    );
  }
  const brokerAddresses = new Map<string, KafkaBrokerAddress>();
  for (const [advertised, dial] of Object.entries(config.brokerAddresses ?? {})) {
    const from = parseBrokerAddress(advertised, 'brokerAddresses');
    brokerAddresses.set(`${from.host}:${from.port}`, parseBrokerAddress(dial, 'brokerAddresses'));
  }
  return Object.freeze({
    brokers,
    clientId,
    names: new KafkaNames(config.prefix ?? d.prefix),
    namespace: new TransportNamespace(config.namespace, '.'),
    topology,
    partitions: wholeNumber(config.partitions ?? d.partitions, 'partitions', 1),
    maxMessageBytes: wholeNumber(config.maxMessageBytes ?? d.maxMessageBytes, 'maxMessageBytes', 4096),
    timeoutMs: durationMs(config.timeout ?? d.timeout, 'timeout', 1),
    failureBackoffMs: durationMs(config.failureBackoff ?? d.failureBackoff, 'failureBackoff', 1),
    retryDiscoveryMs: durationMs(
      config.retryDiscoveryInterval ?? d.retryDiscoveryInterval,
      'retryDiscoveryInterval',
      10,
    ),
    sessionTimeoutMs: durationMs(config.sessionTimeout ?? d.sessionTimeout, 'sessionTimeout', 1000),
    heartbeatMs: durationMs(config.heartbeatInterval ?? d.heartbeatInterval, 'heartbeatInterval', 10),
    fetchMaxBytes: wholeNumber(config.fetchMaxBytes ?? d.fetchMaxBytes, 'fetchMaxBytes', 1024, 2 ** 31 - 1),
    brokerAddresses,
    logger: toLogger(config.logger),
  });
}

/**
 * Options of {@link KafkaTransport.subscribe}: the transport contract's, read the Kafka way.
 * - `concurrency`: records of this member in flight at once, across its partitions and within one. @default 16
 * - `batchSize`: most records of one fetch handed to `processBatch` at once. @default the concurrency
 * - `visibility`: not used — Kafka holds a partition, not a record, for its member (see the docs).
 * - `consumerName`: the member's static group instance id (`group.instance.id`): a restarted member
 *   with the same name gets its partitions back without a rebalance. @default none (dynamic member)
 * - `ordering`: per-key order through an ordering gate, retried in place (see the docs).
 * - `from`: `earliest` reads a new group's partitions from their first offset (the reset policy);
 *   `now` commits their end offsets for the group before it joins. @default 'earliest'
 */
export type KafkaSubscribeOptions = SubscribeOptions;

/** The subscribe options, checked. */
export interface KafkaSubscribeSettings {
  readonly concurrency: number;
  readonly batchSize: number;
  readonly instanceId: string | undefined;
  /** A name for logs. */
  readonly memberName: string;
  /** Where the group starts on partitions it has no committed offset on. */
  readonly from: StartPosition;
}

let members = 0;

/**
 * The Kafka part of the subscribe options (`consumerName`), with what `checkSubscribe` checked of
 * the rest.
 */
export function resolveKafkaSubscribeSettings(
  options: KafkaSubscribeOptions,
  checked: Pick<CheckedSubscribe, 'concurrency' | 'batchSize' | 'from'>,
): KafkaSubscribeSettings {
  const instanceId = options.consumerName;
  if (instanceId !== undefined && (typeof instanceId !== 'string' || !/^\S{1,200}$/.test(instanceId))) {
    throw new ConfigError(
      'consumerName',
      `expected 1 to 200 characters without spaces, got ${JSON.stringify(instanceId)}`,
    );
  }
  return Object.freeze({
    concurrency: checked.concurrency,
    batchSize: checked.batchSize,
    instanceId,
    memberName: instanceId ?? `${hostname()}:${process.pid}:${++members}`,
    from: checked.from,
  });
}
