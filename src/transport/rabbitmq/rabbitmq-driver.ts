/**
 * The part of amqplib (≥ 2.1, promise API) the RabbitMQ transport calls, declared here so that
 * `oncemq/rabbitmq` needs no type from the driver: a user's own connection fits when it has these
 * methods, and the driver is loaded only when the transport opens a connection itself.
 */

/** AMQP header table values as amqplib decodes them. */
export type AmqpHeaders = Record<string, unknown>;

/** Message properties oncemq reads and writes. */
export interface AmqpProperties {
  /** `message-id`: the producer's unique id of the send, kept across its resends. */
  messageId?: string | undefined;
  /** The header table: oncemq's `oncemq-*` headers and the message's own. */
  headers?: AmqpHeaders | undefined;
  /** `timestamp`, in seconds since the epoch: when the message was published. */
  timestamp?: number | undefined;
  /** `content-type`, passed through. */
  contentType?: string | undefined;
  /** `content-encoding`, passed through. */
  contentEncoding?: string | undefined;
  /** `correlation-id`, passed through. */
  correlationId?: string | undefined;
  /** `type`, passed through. */
  type?: string | undefined;
  /** `app-id`, passed through. */
  appId?: string | undefined;
  /** `delivery-mode`: 2 for a persistent message. */
  deliveryMode?: number | undefined;
}

/** A delivered (or fetched, or returned) message. */
export interface AmqpMessageLike {
  /** The body. */
  readonly content: Buffer;
  /** The delivery's fields, as amqplib reports them. */
  readonly fields: {
    /** The channel's tag of this delivery: what `ack` and `nack` name. */
    readonly deliveryTag: number;
    /** True when the broker delivered this copy before (to this or another consumer). */
    readonly redelivered?: boolean;
    /** The exchange it was published to. */
    readonly exchange: string;
    /** The routing key it was published with. */
    readonly routingKey: string;
    /** The consumer it was delivered to (`consume`). */
    readonly consumerTag?: string;
    /** Messages left in the queue (`get`). */
    readonly messageCount?: number;
  };
  /** The message's properties. */
  readonly properties: AmqpProperties;
}

/** `publish` options oncemq passes. */
export interface AmqpPublishOptions extends AmqpProperties {
  /** More routing keys, not shown to consumers (sender-selected distribution). */
  BCC?: string | string[];
  /** Return the message (`return` event) when no queue is bound to take it. */
  mandatory?: boolean;
  /** Store the message on disk (delivery mode 2). */
  persistent?: boolean;
}

/** A confirm channel: every publish is acked (stored) or nacked by the broker. */
export interface AmqpChannelLike {
  /** `close` (the channel ended) or `drain` (the write buffer has room again). */
  on(event: 'close' | 'drain', listener: () => void): unknown;
  /** A channel error (the channel closes after it). */
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** A `mandatory` message the broker could not route, returned. */
  on(event: 'return', listener: (message: AmqpMessageLike) => void): unknown;
  /** Listens for one `drain` or `close`. */
  once(event: 'drain' | 'close', listener: () => void): unknown;
  /** Removes a `drain` or `close` listener. */
  removeListener(event: 'drain' | 'close', listener: () => void): unknown;
  /** Closes the channel. */
  close(): Promise<void>;
  /** `exchange.declare`. */
  assertExchange(exchange: string, type: string, options?: { durable?: boolean }): Promise<unknown>;
  /** `exchange.declare` passive: fails (and closes the channel) when the exchange does not exist. */
  checkExchange(exchange: string): Promise<unknown>;
  /** `queue.declare` with its arguments (queue type, dead-letter exchange, TTL). */
  assertQueue(
    queue: string,
    options?: { durable?: boolean; arguments?: Record<string, unknown> },
  ): Promise<{
    /** The queue's name. */
    queue: string;
    /** Ready messages in the queue. */
    messageCount: number;
    /** Consumers of the queue. */
    consumerCount: number;
  }>;
  /** `queue.declare` passive: fails (and closes the channel) when the queue does not exist. */
  checkQueue(queue: string): Promise<{
    /** The queue's name. */
    queue: string;
    /** Ready messages in the queue. */
    messageCount: number;
    /** Consumers of the queue. */
    consumerCount: number;
  }>;
  /** `queue.delete`. */
  deleteQueue(queue: string): Promise<unknown>;
  /** `exchange.delete`. */
  deleteExchange(exchange: string): Promise<unknown>;
  /** `queue.bind`. */
  bindQueue(queue: string, source: string, pattern: string): Promise<unknown>;
  /** `queue.unbind`. */
  unbindQueue(queue: string, source: string, pattern: string): Promise<unknown>;
  /**
   * `basic.publish`; `callback` is called on the broker's confirm (no error) or nack. Returns false
   * when the write buffer is full (wait for `drain`).
   */
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: AmqpPublishOptions,
    callback: (error: unknown) => void,
  ): boolean;
  /** `basic.consume`: `onMessage` gets each delivery, and `null` when the broker cancels the consumer. */
  consume(
    queue: string,
    onMessage: (message: AmqpMessageLike | null) => void,
    options?: { noAck?: boolean; consumerTag?: string; arguments?: Record<string, unknown> },
  ): Promise<{
    /** The consumer's tag, for `cancel`. */
    consumerTag: string;
  }>;
  /** `basic.cancel`: stops a consumer. */
  cancel(consumerTag: string): Promise<unknown>;
  /** `basic.get`: one message, or `false` when the queue is empty. */
  get(queue: string, options?: { noAck?: boolean }): Promise<AmqpMessageLike | false>;
  /** `basic.ack` of one delivery. */
  ack(message: AmqpMessageLike): void;
  /** `basic.nack`; with `requeue` false the broker drops the delivery or dead-letters it by the queue's policy. */
  nack(message: AmqpMessageLike, allUpTo?: boolean, requeue?: boolean): void;
  /** `basic.qos`: most unacked deliveries at once. */
  prefetch(count: number, global?: boolean): Promise<unknown>;
}

/**
 * A connection: amqplib's `ChannelModel` (from `connect(url)`), or its recovering model (from
 * `connect(url, { recovery })`), whose `createConfirmChannel` waits for the next reconnection.
 */
export interface AmqpConnectionLike {
  /** Opens a channel in confirm mode. */
  createConfirmChannel(): Promise<AmqpChannelLike>;
  /** Closes the connection; called on `close()` only for a connection the transport opened. */
  close(): Promise<void>;
  /** A connection error. */
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** The connection closed, or (recovering connection) was lost and is being opened again. */
  on(event: 'close' | 'disconnect', listener: (error?: Error) => void): unknown;
  /** A recovering connection opened again. */
  on(event: 'connect', listener: (model: AmqpModelLike) => void): unknown;
  /** Removes a listener added with `on`. */
  removeListener(event: string, listener: (...args: never[]) => void): unknown;
  /** Present on a plain `ChannelModel`: the server's properties (its version). */
  readonly connection?:
    | {
        /** What the server told at the handshake. */
        readonly serverProperties?: {
          /** The RabbitMQ version. */
          readonly version?: unknown;
        };
      }
    | undefined;
}

/**
 * What a recovering connection hands its `setup` hook and `connect` listeners: amqplib's
 * `ChannelModel` of the connection just opened.
 */
export interface AmqpModelLike {
  /** The underlying connection. */
  readonly connection?:
    | {
        /** What the server told at the handshake. */
        readonly serverProperties?: {
          /** The RabbitMQ version. */
          readonly version?: unknown;
        };
        /** The socket: destroyed when the broker does not answer a close. */
        readonly stream?:
          | {
              /** Destroys the socket. */
              destroy(error?: Error): void;
            }
          | undefined;
      }
    | undefined;
  /** Emitted once the connection is closed, however it closed (a socket error, a close-ok). */
  once?(event: 'close', listener: () => void): unknown;
  /** A connection error. */
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
