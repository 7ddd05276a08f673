import { ClosedError, ConfigError, errorText, TransportUnavailableError } from '../../core/errors.js';
import { redactUrl, unreachableCause, unreachableMessage } from '../../core/unreachable.js';
import type { AmqpConnect, AmqpConnectionLike, AmqpModelLike } from './rabbitmq-driver.js';
import { RabbitChannel, settlesWithin } from './rabbitmq-channel.js';
import type { RabbitSettings } from './rabbitmq-config.js';

/** Tries at opening the transport's own connection before start-up fails. */
export const INITIAL_CONNECT_RETRIES = 3;

/** Longest opening handshake of one connection attempt; a stalled one is dropped and tried again. */
export const CONNECT_TIMEOUT_MS = 10_000;

function versionOf(model: AmqpModelLike | AmqpConnectionLike | undefined): string | undefined {
  const version = model?.connection?.serverProperties?.version;
  return typeof version === 'string' ? version : undefined;
}

/**
 * The transport's connection: the user's own, or a recovering amqplib connection that reconnects
 * with backoff after a loss. Channels are opened here; a channel asked for during an outage waits
 * for the reconnection, for at most the given time.
 */
export class RabbitConnection {
  readonly #settings: RabbitSettings;
  #model: AmqpConnectionLike | undefined;
  #opening: Promise<AmqpConnectionLike> | undefined;
  #closed = false;
  /** The amqplib connection under the recovering one: the last one opened (its socket). */
  #current: AmqpModelLike | undefined;
  /** The server's version (`3.10.8`), once known. */
  serverVersion: string | undefined;

  constructor(settings: RabbitSettings) {
    this.#settings = settings;
  }

  /** Opens the connection once (retried after a failed open). */
  open(): Promise<AmqpConnectionLike> {
    if (this.#closed) return Promise.reject(new ClosedError('RabbitMQ transport'));
    if (this.#model !== undefined) return Promise.resolve(this.#model);
    this.#opening ??= this.#connect().then(
      (model) => {
        this.#model = model;
        return model;
      },
      (error: unknown) => {
        this.#opening = undefined;
        throw error;
      },
    );
    return this.#opening;
  }

  async #connect(): Promise<AmqpConnectionLike> {
    const { logger } = this.#settings;
    const own = this.#settings.connection;
    if (own !== undefined) {
      this.serverVersion = versionOf(own);
      own.on('connect', (model) => {
        this.serverVersion = versionOf(model) ?? this.serverVersion;
      });
      return own;
    }
    let connect: AmqpConnect;
    try {
      const module = (await import('amqplib')) as unknown as {
        connect?: AmqpConnect;
        default?: { connect: AmqpConnect };
      };
      const found = module.connect ?? module.default?.connect;
      if (found === undefined) throw new Error('amqplib has no connect()');
      connect = found;
    } catch (error) {
      throw new ConfigError(
        'connection',
        'the RabbitMQ transport needs the amqplib package (npm install amqplib@2)',
        { cause: error },
      );
    }
    try {
      const model = await connect(this.#settings.url, {
        recovery: {
          initialDelay: this.#settings.reconnectDelayMs,
          maxDelay: this.#settings.maxReconnectDelayMs,
          initialMaxRetries: INITIAL_CONNECT_RETRIES,
          setup: (opened) => {
            this.serverVersion = versionOf(opened) ?? this.serverVersion;
            this.#current = opened;
            return Promise.resolve();
          },
        },
        clientProperties: { connection_name: 'oncemq' },
        timeout: Math.min(CONNECT_TIMEOUT_MS, this.#settings.publishTimeoutMs),
      });
      model.on('error', (error) => {
        logger.warn('oncemq: RabbitMQ connection error', { error: errorText(error) });
      });
      model.on('disconnect', (error) => {
        logger.warn('oncemq: RabbitMQ connection lost; reconnecting', { error: errorText(error) });
      });
      return model;
    } catch (error) {
      const down = unreachableCause(error);
      throw new TransportUnavailableError(
        down === undefined
          ? `cannot connect to RabbitMQ at ${redact(this.#settings.url)}: ${errorText(error)}`
          : unreachableMessage({ server: 'RabbitMQ', url: this.#settings.url, detail: down.message }),
        { cause: error },
      );
    }
  }

  /**
   * A new confirm channel. During an outage it waits for the reconnection, at most `timeoutMs`;
   * a channel that opens after the wait gave up is closed at once. `probing`: see {@link RabbitChannel}.
   */
  async channel(label: string, timeoutMs: number, probing = false): Promise<RabbitChannel> {
    const model = await this.open();
    let timer: NodeJS.Timeout | undefined;
    let gaveUp = false;
    const opening = model.createConfirmChannel();
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        gaveUp = true;
        reject(
          new TransportUnavailableError(
            `no RabbitMQ channel within ${timeoutMs}ms (${redact(this.#settings.url)} unreachable?)`,
          ),
        );
      }, timeoutMs);
    });
    opening.then(
      (raw) => {
        if (gaveUp) void raw.close().catch(() => undefined);
      },
      () => undefined,
    );
    try {
      const raw = await Promise.race([opening, deadline]);
      if (this.#closed) {
        await raw.close().catch(() => undefined);
        throw new ClosedError('RabbitMQ transport');
      }
      return new RabbitChannel(raw, this.#settings.logger, label, probing, this.#settings.closeTimeoutMs);
    } catch (error) {
      if (error instanceof TransportUnavailableError || error instanceof ClosedError) throw error;
      throw new TransportUnavailableError(`cannot open a RabbitMQ channel: ${errorText(error)}`, {
        cause: error,
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Closes the connection when the transport opened it; a user's own connection is left open.
   * Ends in bounded time: amqplib's `close()` settles only on the broker's `connection.close-ok`,
   * which never comes when the socket died after the close was sent (the connection's `close`
   * event ends the wait then) or when the broker or the network stalls. After `closeTimeout` the
   * socket is destroyed, which closes the connection and its channels on this side. Frames sent
   * before the close (acks, nacks) went out on the socket ahead of it: whatever the broker got of
   * them it applies; a stalled network may hold some back, and those deliveries come again.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const model = this.#model ?? (await this.#opening?.catch(() => undefined));
    if (model === undefined || this.#settings.connection !== undefined) return;
    const current = this.#current;
    // An amqplib connection with no 'error' listener throws its socket's error (a cut during the close).
    current?.on?.('error', () => undefined);
    const closed = new Promise<void>((resolve) => current?.once?.('close', () => resolve()));
    const closing = model.close();
    if (await settlesWithin(Promise.race([closing, closed]), this.#settings.closeTimeoutMs)) return;
    this.#settings.logger.warn('oncemq: RabbitMQ did not answer the connection close; dropping the socket', {
      closeTimeoutMs: this.#settings.closeTimeoutMs,
    });
    // With an error, so that amqplib ends the connection on its side too (and stops its heartbeat).
    current?.connection?.stream?.destroy(new Error(`no close-ok within ${this.#settings.closeTimeoutMs}ms`));
  }
}

/** A URL without its password, for messages. */
export const redact = redactUrl;
