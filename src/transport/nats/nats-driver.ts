import type {
  JetStreamClient,
  JetStreamManager,
  JetStreamManagerOptions,
  JetStreamOptions,
} from '@nats-io/jetstream';
import type { ConnectionOptions, Msg, MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import { ConfigError } from '../../core/errors.js';

/**
 * The part of a NATS connection oncemq calls itself. Pass a connection made by `connect()` of
 * `@nats-io/transport-node` 3: the JetStream client built on it needs the whole of it.
 */
export interface NatsConnectionLike {
  /** The connection's status events: oncemq watches for disconnects and reconnects. */
  status(): AsyncIterable<{
    /** The event: `disconnect`, `reconnect`, `close`, … */
    readonly type: string;
  }>;
  /** Core NATS publish: pull requests, and acks sent to a delivery's reply subject. */
  publish(subject: string, payload?: string | Uint8Array, options?: { reply?: string }): void;
  /** A core NATS subscription (a pull's or an ack confirm's inbox), its messages handed to `callback`. */
  subscribe(
    subject: string,
    options: { callback: (error: Error | null, msg: Msg) => void },
  ): NatsSubscriptionLike;
  /** True once the connection is closed for good. */
  isClosed(): boolean;
  /** Closes the connection; called on `close()` only for a connection oncemq made. */
  close(): Promise<void>;
}

/** A core NATS subscription, as oncemq uses it. */
export interface NatsSubscriptionLike {
  unsubscribe(): void;
}

/** The functions oncemq takes from `@nats-io/transport-node` and `@nats-io/jetstream`. */
export interface NatsDriver {
  connect(options: ConnectionOptions): Promise<NatsConnection>;
  headers(): MsgHdrs;
  jetstream(connection: NatsConnection, options: JetStreamOptions): JetStreamClient;
  jetstreamManager(connection: NatsConnection, options: JetStreamManagerOptions): Promise<JetStreamManager>;
}

const INSTALL = 'npm install @nats-io/transport-node@3 @nats-io/jetstream@3';

/** Loads the NATS packages when a NATS transport opens (oncemq itself loads no driver). */
export async function loadNatsDriver(): Promise<NatsDriver> {
  try {
    const [transport, jetstream] = await Promise.all([
      import('@nats-io/transport-node'),
      import('@nats-io/jetstream'),
    ]);
    return {
      connect: (options) => transport.connect(options),
      headers: () => transport.headers(),
      jetstream: (connection, options) => jetstream.jetstream(connection, options),
      jetstreamManager: (connection, options) => jetstream.jetstreamManager(connection, options),
    };
  } catch (error) {
    throw new ConfigError('connection', `the NATS transport needs the NATS client packages (${INSTALL})`, {
      cause: error,
    });
  }
}
