import { tracePublish } from '../../telemetry/trace-publish.js';
import { randomUUID } from 'node:crypto';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { parseDuration } from '../../core/duration.js';
import { encodeBody, KEY_HEADER, ORDERING_KEY_HEADER } from '../../core/envelope.js';
import { ClosedError, ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { configObject, OPTIONAL_CONFIG } from '../config-checks.js';
import { redactUrl, unreachableCause, unreachableMessage } from '../../core/unreachable.js';
import {
  DEFAULT_SUBSCRIBE_OPTIONS,
  toProcessor,
  type OrderingOptions,
  type OutgoingMessage,
  type Processor,
  type ProcessorLike,
  type PublishReceipt,
  type StartPosition,
  type SubscribeOptions,
  type Transport,
  type TransportCapabilities,
} from '../transport.js';
import { resolveNatsSettings, type NatsSettings, type NatsTransportConfig } from './nats-config.js';
import { checkSubscribe } from '../subscribe-options.js';
import { NatsDeadLetters } from './nats-dead-letters.js';
import type { DeadLetterSizeLimit } from '../dead-letters.js';
import type { DeliveryContext, DeliverySource } from './nats-delivery.js';
import { loadNatsDriver, type NatsDriver } from './nats-driver.js';
import {
  brokerIdOf,
  consumerName,
  RETRY_DUE_HEADER,
  RETRY_TOPIC_HEADER,
  retryStream,
  retrySubject,
  slotSubject,
  topicStream,
  validNatsTopic,
} from './nats-names.js';
import { subscribeOrderedGroup } from './nats-ordered-group.js';
import type { NatsOrderedSubscription } from './nats-ordered-subscription.js';
import type { NatsDrainingSubscription } from './nats-partition-drain.js';
import { NatsPublisher } from './nats-publisher.js';
import { NatsConfirms } from './nats-confirms.js';
import { NatsSession } from './nats-session.js';
import { NatsSettler } from './nats-settler.js';
import { NatsSubscription } from './nats-subscription.js';
import { NatsTopology } from './nats-topology.js';
import { checkDeliveryCount, checkNamedTopic, checkRetryDue, guardHeaders } from '../header-guard.js';

/** What an open transport holds. */
interface Open {
  readonly driver: NatsDriver;
  readonly connection: NatsConnection;
  readonly owned: boolean;
  readonly session: NatsSession;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly topology: NatsTopology;
  readonly publisher: NatsPublisher;
  readonly confirms: NatsConfirms;
}

/** What the deliveries of one group's subscription settle through. */
function deliveryContext(group: string, settings: NatsSettings, open: Open): DeliveryContext {
  const { connection, session, publisher, confirms } = open;
  const deadLetterLimit = async (): Promise<DeadLetterSizeLimit> => {
    // The server refuses a message (headers and body) over max_payload, the stream one over its max_msg_size.
    const maxPayload = connection.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
    const streamMax = (await open.topology.deadLetterStream()).config.max_msg_size;
    return {
      maxBytes: streamMax > 0 ? Math.min(maxPayload, streamMax) : maxPayload,
      maxHeaderBytes: JETSTREAM_MAX_HEADER_BYTES,
    };
  };
  const settler = new NatsSettler({ group, settings, publisher, deadLetterLimit });
  return { group, settings, connection, session, confirms, settler };
}

/** The server's `max_payload` when the connection has not said it: the NATS default, 1 MiB. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** JetStream refuses a message with more header bytes than this ("header size exceeds maximum allowed of 64k"). */
export const JETSTREAM_MAX_HEADER_BYTES = 65_535;

/** How a member of a group reads its part (see docs/transports/nats.md). */
export type NatsSubscribeOptions = SubscribeOptions;

/**
 * NATS JetStream: a stream per topic, a durable pull consumer per group (members of a group pull
 * from it together), confirmed publishes with the business key as `Nats-Msg-Id`, charged retries
 * as new copies on the group's retry subject, dead letters in a stream of their own.
 */
export class NatsTransport implements Transport {
  readonly name = 'nats';
  readonly deadLetters: NatsDeadLetters;
  readonly #settings: NatsSettings;
  readonly #subscriptions = new Set<NatsSubscription | NatsOrderedSubscription | NatsDrainingSubscription>();
  #opening: Promise<Open> | undefined;
  #open: Open | undefined;
  #closed = false;

  constructor(config: NatsTransportConfig = {}) {
    this.#settings = resolveNatsSettings(configObject(config, 'config', OPTIONAL_CONFIG));
    this.deadLetters = new NatsDeadLetters(async () => {
      const open = await this.#connect();
      await open.session.ready(this.#settings.requestTimeoutMs);
      return { settings: this.#settings, jsm: open.jsm, topology: open.topology, publisher: open.publisher };
    });
  }

  /**
   * Everything but half messages; `brokerDedupWindowMs` is the streams' duplicate window (as
   * created, once connected).
   */
  get capabilities(): TransportCapabilities {
    return Object.freeze({
      delay: true,
      deadLetter: true,
      ordering: true,
      brokerDedupWindowMs: this.#open?.topology.duplicateWindowMs ?? this.#settings.duplicateWindowMs,
      halfMessages: false,
      batch: true,
      keepAlive: true,
    });
  }

  /** How many times the connection was lost so far (each loss ends a session; see the docs). */
  get connectionLosses(): number {
    return this.#open?.session.generation ?? 0;
  }

  /** Connects and loads the JetStream client. Idempotent; the other methods call it. */
  async init(): Promise<void> {
    await this.#connect();
  }

  #connect(): Promise<Open> {
    if (this.#closed) return Promise.reject(new ClosedError('NATS transport'));
    if (this.#open !== undefined) return Promise.resolve(this.#open);
    this.#opening ??= this.#start().catch((error: unknown) => {
      this.#opening = undefined;
      throw error;
    });
    return this.#opening;
  }

  async #start(): Promise<Open> {
    const settings = this.#settings;
    const driver = await loadNatsDriver();
    let connection: NatsConnection;
    const owned = settings.connection === undefined;
    try {
      connection =
        (settings.connection as NatsConnection | undefined) ??
        (await driver.connect({
          servers: [...settings.servers],
          name: 'oncemq',
          maxReconnectAttempts: -1,
          reconnectTimeWait: 500,
          // Every request (each publish, ack, nak, term) would otherwise build two errors with stack
          // traces in advance, in case it fails: a fifth of the CPU of a busy consumer.
          noAsyncTraces: true,
        }));
    } catch (error) {
      const servers = settings.servers.join(', ');
      const down = unreachableCause(error);
      throw new TransportUnavailableError(
        down === undefined
          ? `cannot connect to NATS at ${redactUrl(servers)}: ${errorText(error)}`
          : unreachableMessage({ server: 'NATS', url: servers, detail: down.message }),
        { cause: error },
      );
    }
    try {
      const options = { timeout: settings.requestTimeoutMs };
      const jsm = await driver.jetstreamManager(connection, options);
      const js = driver.jetstream(connection, options);
      const session = new NatsSession(connection, settings.logger);
      const open: Open = {
        driver,
        connection,
        owned,
        session,
        js,
        jsm,
        topology: new NatsTopology(jsm, settings),
        publisher: new NatsPublisher(js, driver, settings, session),
        confirms: new NatsConfirms(connection, settings.requestTimeoutMs),
      };
      this.#open = open;
      return open;
    } catch (error) {
      if (owned) await connection.close().catch(() => undefined);
      throw new TransportUnavailableError(`NATS JetStream is not available: ${errorText(error)}`, {
        cause: error,
      });
    }
  }

  /** Publishes inside a producer span whose trace context travels in the headers (docs/observability.md). */
  publish(message: OutgoingMessage): Promise<PublishReceipt> {
    return tracePublish(this.name, message, (traced) => this.#publish(traced));
  }

  async #publish(message: OutgoingMessage): Promise<PublishReceipt> {
    const topic = validNatsTopic(message.topic);
    const open = await this.#connect();
    const headers: Record<string, string> = { ...message.headers };
    const producerId = headers['Nats-Msg-Id'];
    delete headers['Nats-Msg-Id'];
    if (message.key !== undefined) headers[KEY_HEADER] = message.key;
    const orderingKey = message.orderingKey ?? message.headers?.[ORDERING_KEY_HEADER];
    if (orderingKey !== undefined) headers[ORDERING_KEY_HEADER] = orderingKey;
    // The business key is the producer's id: a resend of it inside the window is dropped by the server.
    const msgId = message.key ?? producerId ?? randomUUID();
    let sends = 0;
    const ack = await open.publisher.publish(
      {
        subject: slotSubject(this.#settings, topic, orderingKey),
        body: encodeBody(message.body),
        headers,
        msgId,
      },
      async () => {
        // A resend checks the stream again: it may have been deleted (topology 'create' makes it anew).
        if (sends++ > 0) open.topology.forget(topicStream(this.#settings, topic));
        await open.topology.topicStream(topic);
      },
    );
    return {
      brokerId: brokerIdOf(ack.stream, ack.seq),
      topic,
      messageId: msgId,
      duplicate: ack.duplicate,
      position: { stream: ack.stream, seq: ack.seq },
    };
  }

  async subscribe(
    group: string,
    topics: readonly string[],
    processor: ProcessorLike,
    options: NatsSubscribeOptions = {},
  ): Promise<NatsSubscription | NatsOrderedSubscription | NatsDrainingSubscription> {
    // The delivery count of every message; a retry copy's topic and due time (read on the group's retry
    // stream alone: a bad due time is left in the headers for this check, a topic stream's is not read).
    const target = guardHeaders(
      toProcessor(processor),
      group,
      (envelope) =>
        checkDeliveryCount(envelope.headers) ??
        checkRetryDue(RETRY_DUE_HEADER, envelope.headers[RETRY_DUE_HEADER]) ??
        checkNamedTopic(RETRY_TOPIC_HEADER, envelope.topic, topics),
      this.#settings.logger,
    );
    const { concurrency, batchSize, from, ordering } = checkSubscribe(group, topics, target, options, {
      topic: validNatsTopic,
    });
    if (ordering !== undefined)
      return this.#subscribeOrdered(group, topics, target, concurrency, options, ordering, from);
    const ackWaitMs = ackWaitOf(options);
    const open = await this.#connect();
    const settings = this.#settings;
    await open.session.ready(settings.requestTimeoutMs);
    const { topology } = open;
    const name = consumerName(group);
    await topology.retryStream();
    await topology.deadLetterStream();
    const specs = new Map<DeliverySource, () => Promise<void>>();
    const sources: DeliverySource[] = [];
    const addSource = async (
      topic: string | null,
      stream: string,
      ensureStream: () => Promise<unknown>,
      filterSubject?: string,
    ): Promise<void> => {
      const ensure = async (): Promise<number> => {
        await ensureStream();
        const info = await topology.consumer({
          stream,
          name,
          ackWaitMs,
          // A topic's consumer starts where the group asked; its own retry stream's at its first copy.
          from: topic === null ? 'earliest' : from,
          ...(filterSubject === undefined ? {} : { filterSubject }),
        });
        return (info.config.ack_wait ?? ackWaitMs * 1_000_000) / 1_000_000;
      };
      const ackWait = await ensure();
      // Well inside the ack wait: a keep-alive that is late once still lands in time.
      const source = {
        stream,
        consumer: name,
        topic,
        keepAliveEveryMs: Math.max(1, Math.floor(ackWait / 3)),
      };
      sources.push(source);
      specs.set(source, async () => {
        await ensure();
      });
    };
    for (const topic of topics) {
      await addSource(topic, topicStream(settings, topic), () => topology.topicStream(topic));
    }
    await addSource(null, retryStream(settings), () => topology.retryStream(), retrySubject(settings, group));
    const subscription = new NatsSubscription(group, topics, {
      ctx: deliveryContext(group, settings, open),
      sources,
      ensure: async (source) => {
        topology.forget(source.stream);
        await specs.get(source)?.();
      },
      processor: target,
      concurrency,
      batchSize,
    });
    if (options.consumerName !== undefined) {
      settings.logger.debug(
        'oncemq: NATS members of a group are anonymous; consumerName only names this one in logs',
        {
          group,
          consumerName: options.consumerName,
        },
      );
    }
    this.#subscriptions.add(subscription);
    subscription.onClose = () => this.#subscriptions.delete(subscription);
    subscription.start();
    return subscription;
  }

  /**
   * An ordered member: the group's recorded partition count is checked (and, with
   * `ordering.onPartitionChange: 'drain'`, a new one drained to), each partition's consumers are
   * created (or checked) on every topic's stream, then the member takes the partitions it can lease
   * (see docs/transports/nats.md#per-key-ordering).
   */
  async #subscribeOrdered(
    group: string,
    topics: readonly string[],
    processor: Processor,
    concurrency: number,
    options: NatsSubscribeOptions,
    ordering: OrderingOptions,
    from: StartPosition,
  ): Promise<NatsOrderedSubscription | NatsDrainingSubscription> {
    const ackWaitMs = ackWaitOf(options);
    const open = await this.#connect();
    const settings = this.#settings;
    await open.session.ready(settings.requestTimeoutMs);
    const { topology } = open;
    await topology.deadLetterStream();
    await topology.leaseStream();
    await topology.orderingStream();
    const subscription = await subscribeOrderedGroup({
      ...open,
      settings,
      ctx: deliveryContext(group, settings, open),
      group,
      topics,
      processor,
      concurrency,
      ackWaitMs,
      ordering,
      from,
    });
    this.#subscriptions.add(subscription);
    subscription.onClose = () => this.#subscriptions.delete(subscription);
    return subscription;
  }

  /** Closes every subscription (each drains), then the connection when oncemq opened it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.close()));
    const open = this.#open ?? (await this.#opening?.catch(() => undefined));
    open?.confirms.close();
    if (open?.owned === true) {
      await open.connection.close().catch(() => undefined);
      await open.session.ended();
    }
  }
}

/** The consumers' ack wait: the subscription's `visibility`. */
function ackWaitOf(options: NatsSubscribeOptions): number {
  const ms = parseDuration(options.visibility ?? DEFAULT_SUBSCRIBE_OPTIONS.visibility, 'visibility');
  if (ms < 100) throw new ConfigError('visibility', 'must be at least 100ms');
  return ms;
}
