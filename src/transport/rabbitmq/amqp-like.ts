/**
 * The part of amqplib (≥ 2.1, promise API) the RabbitMQ transport calls, declared here so that
 * `oncemq/rabbitmq` needs no type from the driver: a user's own connection fits when it has these
 * methods, and the driver is loaded only when the transport opens a connection itself.
 */

/** AMQP header table values as amqplib decodes them. */
export type AmqpHeaders = Record<string, unknown>;

/** Message properties oncemq reads and writes. */
export interface AmqpProperties {
  messageId?: string | undefined;
  headers?: AmqpHeaders | undefined;
  timestamp?: number | undefined;
  contentType?: string | undefined;
  contentEncoding?: string | undefined;
  correlationId?: string | undefined;
  type?: string | undefined;
  appId?: string | undefined;
  deliveryMode?: number | undefined;
}

/** A delivered (or fetched, or returned) message. */
export interface AmqpMessageLike {
  readonly content: Buffer;
  readonly fields: {
    readonly deliveryTag: number;
    readonly redelivered?: boolean;
    readonly exchange: string;
    readonly routingKey: string;
    readonly consumerTag?: string;
    readonly messageCount?: number;
  };
  readonly properties: AmqpProperties;
}

/** `publish` options oncemq passes. */
export interface AmqpPublishOptions extends AmqpProperties {
  /** More routing keys, not shown to consumers (sender-selected distribution). */
  BCC?: string | string[];
  mandatory?: boolean;
  persistent?: boolean;
}

/** A confirm channel: every publish is acked (stored) or nacked by the broker. */
export interface AmqpChannelLike {
  on(event: 'close' | 'drain', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'return', listener: (message: AmqpMessageLike) => void): unknown;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  removeListener(event: 'drain' | 'close', listener: () => void): unknown;
  close(): Promise<void>;
  assertExchange(exchange: string, type: string, options?: { durable?: boolean }): Promise<unknown>;
  checkExchange(exchange: string): Promise<unknown>;
  assertQueue(
    queue: string,
    options?: { durable?: boolean; arguments?: Record<string, unknown> },
  ): Promise<{ queue: string; messageCount: number; consumerCount: number }>;
  checkQueue(queue: string): Promise<{ queue: string; messageCount: number; consumerCount: number }>;
  deleteQueue(queue: string): Promise<unknown>;
  deleteExchange(exchange: string): Promise<unknown>;
  bindQueue(queue: string, source: string, pattern: string): Promise<unknown>;
  unbindQueue(queue: string, source: string, pattern: string): Promise<unknown>;
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: AmqpPublishOptions,
    callback: (error: unknown) => void,
  ): boolean;
  consume(
    queue: string,
    onMessage: (message: AmqpMessageLike | null) => void,
    options?: { noAck?: boolean; consumerTag?: string; arguments?: Record<string, unknown> },
  ): Promise<{ consumerTag: string }>;
  cancel(consumerTag: string): Promise<unknown>;
  get(queue: string, options?: { noAck?: boolean }): Promise<AmqpMessageLike | false>;
  ack(message: AmqpMessageLike): void;
  nack(message: AmqpMessageLike, allUpTo?: boolean, requeue?: boolean): void;
  prefetch(count: number, global?: boolean): Promise<unknown>;
}

/**
 * A connection: amqplib's `ChannelModel` (from `connect(url)`), or its recovering model (from
 * `connect(url, { recovery })`), whose `createConfirmChannel` waits for the next reconnection.
 */
export interface AmqpConnectionLike {
  createConfirmChannel(): Promise<AmqpChannelLike>;
  close(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'close' | 'disconnect', listener: (error?: Error) => void): unknown;
  on(event: 'connect', listener: (model: AmqpModelLike) => void): unknown;
  removeListener(event: string, listener: (...args: never[]) => void): unknown;
  /** Present on a plain `ChannelModel`: the server's properties (its version). */
  readonly connection?: { readonly serverProperties?: { readonly version?: unknown } } | undefined;
}

/**
 * What a recovering connection hands its `setup` hook and `connect` listeners: amqplib's
 * `ChannelModel` of the connection just opened.
 */
export interface AmqpModelLike {
  readonly connection?:
    | {
        readonly serverProperties?: { readonly version?: unknown };
        /** The socket: destroyed when the broker does not answer a close. */
        readonly stream?: { destroy(error?: Error): void } | undefined;
      }
    | undefined;
  /** Emitted once the connection is closed, however it closed (a socket error, a close-ok). */
  once?(event: 'close', listener: () => void): unknown;
  on?(event: 'error', listener: (error: Error) => void): unknown;
}

/** The amqplib module's `connect`, as oncemq calls it. */
export type AmqpConnect = (
  url: string,
  options: {
    recovery: {
      initialDelay: number;
      maxDelay: number;
      initialMaxRetries: number;
      setup: (model: AmqpModelLike) => Promise<void>;
    };
    clientProperties?: Record<string, unknown>;
    /** Socket timeout of the opening handshake (amqplib clears it once open). */
    timeout?: number;
  },
) => Promise<AmqpConnectionLike>;
