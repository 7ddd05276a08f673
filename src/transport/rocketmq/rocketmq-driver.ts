/**
 * The part of `rocketmq-client-nodejs` oncemq calls, typed here so that the package stays an
 * optional peer, loaded only when a RocketMQ transport opens.
 */
import { ConfigError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { guardTelemetry } from './rocketmq-telemetry-guard.js';

/** A received message (`MessageView`); `receiptHandle` is replaced by each visibility change. */
export interface MessageViewLike {
  /** The message id the broker gave the stored copy. */
  readonly messageId: string;
  /** The topic it was received from. */
  readonly topic: string;
  /** The body. */
  readonly body: Buffer;
  /** Its message group, on a FIFO topic. */
  readonly messageGroup?: string | undefined;
  /** Its keys (oncemq's producers set the business key). */
  readonly keys: string[];
  /** When it was first sent. */
  readonly bornTimestamp?: Date | undefined;
  /** The broker's count of deliveries of this copy. */
  readonly deliveryAttempt?: number | undefined;
  /** The handle `ack` and `changeInvisibleDuration` name; each visibility change replaces it. */
  readonly receiptHandle: string;
  /** Its offset in its queue. */
  readonly offset?: number | undefined;
  /** Its user properties: oncemq's headers. */
  readonly properties: Map<string, string>;
}

/** A message to send (`MessageOptions`). */
export interface SendMessageLike {
  topic: string;
  body: Buffer;
  keys?: string[];
  messageGroup?: string;
  properties?: Map<string, string>;
  delay?: number;
}

/** The broker's answer to a send (`SendReceipt`). */
export interface SendReceiptLike {
  readonly messageId: string;
  readonly offset?: number | undefined;
}

/** A transaction of one half message (`Transaction`). */
export interface TransactionLike {
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

/** The part of the client's `Producer` oncemq calls. */
export interface ProducerLike {
  /** Starts the producer: connects to the proxy. */
  startup(): Promise<void>;
  /** Stops the producer and closes its connections. */
  shutdown(): Promise<void>;
  /** Sends a message (inside `transaction`: as its half message) and resolves on the broker's receipt. */
  send(message: SendMessageLike, transaction?: TransactionLike): Promise<SendReceiptLike>;
  /** Starts a transaction for one half message. */
  beginTransaction(): TransactionLike;
}

/** The part of the client's `SimpleConsumer` oncemq calls. */
export interface SimpleConsumerLike {
  /** Starts the consumer of its group: connects to the proxy. */
  startup(): Promise<void>;
  /** Stops the consumer and closes its connections. */
  shutdown(): Promise<void>;
  /** Long-polls up to `maxMessageNum` messages, each invisible to other consumers for `invisibleDurationMs`. */
  receive(maxMessageNum: number, invisibleDurationMs: number): Promise<MessageViewLike[]>;
  /** Acks a received message by its current receipt handle. */
  ack(message: MessageViewLike): Promise<void>;
  /** Makes a received message invisible for `invisibleDurationMs` from now (a delayed retry, or keep-alive). */
  changeInvisibleDuration(message: MessageViewLike, invisibleDurationMs: number): Promise<void>;
}

/** The client's logger shape (`ILogger`). */
export interface ClientLoggerLike {
  info(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
  debug(...args: unknown[]): void;
}

/**
 * The namespace every client is given: none. oncemq names the broker's topics and groups itself
 * (`RocketMQSettings.names`), so a proxy that honours a client namespace never prefixes them twice.
 */
export const CLIENT_NAMESPACE = '';

interface ClientOptions {
  endpoints: string;
  namespace: string;
  requestTimeout: number;
  logger: ClientLoggerLike;
}

/** `TransactionResolution` of the client's protocol: unspecified (no answer yet), commit, rollback. */
export const TransactionResolution = Object.freeze({ UNKNOWN: 0, COMMIT: 1, ROLLBACK: 2 });

export interface RocketMQDriver {
  producer(
    options: ClientOptions & {
      topics?: string[];
      maxAttempts?: number;
      checker?: { check(message: MessageViewLike): Promise<number> };
    },
    logger: Logger,
  ): ProducerLike;
  simpleConsumer(
    options: ClientOptions & {
      consumerGroup: string;
      subscriptions: Map<string, string>;
      awaitDuration: number;
    },
    logger: Logger,
  ): SimpleConsumerLike;
}

interface ClientModule {
  Producer: new (options: object) => ProducerLike;
  SimpleConsumer: new (options: object) => SimpleConsumerLike;
}

const INSTALL = 'npm install rocketmq-client-nodejs@1.0.8';

/** Loads `rocketmq-client-nodejs` when a RocketMQ transport opens (oncemq itself loads no driver). */
export async function loadRocketMQDriver(): Promise<RocketMQDriver> {
  let client: ClientModule;
  try {
    const loaded = (await import('rocketmq-client-nodejs')) as ClientModule & { default?: ClientModule };
    client = loaded.default ?? loaded;
  } catch (error) {
    throw new ConfigError('url', `the RocketMQ transport needs the RocketMQ client (${INSTALL})`, {
      cause: error,
    });
  }
  return {
    producer: (options, logger) => guardTelemetry(new client.Producer(options), logger),
    simpleConsumer: (options, logger) => guardTelemetry(new client.SimpleConsumer(options), logger),
  };
}

/** The client logs through oncemq's logger at debug level (its own default writes to ~/logs). */
export function clientLogger(logger: Logger): ClientLoggerLike {
  const write =
    (level: string) =>
    (...args: unknown[]): void => {
      logger.debug(`rocketmq-client: ${args.map(String).join(' ')}`, { level });
    };
  return { info: write('info'), warn: write('warn'), error: write('error'), debug: write('debug') };
}
