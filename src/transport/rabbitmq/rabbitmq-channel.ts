import { errorText, OncemqError, TransportUnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { AmqpChannelLike, AmqpMessageLike, AmqpPublishOptions } from './rabbitmq-driver.js';

/** What every publish asks for: returned when unroutable, stored to disk. */
const MANDATORY_PERSISTENT = Object.freeze({ mandatory: true, persistent: true });

/** Why a publish was not confirmed as stored. */
export type UnconfirmedReason =
  /** The channel closed before the confirm: the copy may or may not be stored. */
  | 'lost'
  /** The broker refused to store it. */
  | 'nacked'
  /** No queue is bound for its routing key: returned, not stored (confirmed all the same). */
  | 'unroutable';

/** A publish the broker did not confirm as stored. */
export class UnconfirmedPublishError extends TransportUnavailableError {
  /** Why: `lost` (maybe stored), `nacked` or `unroutable` (not stored). */
  readonly reason: UnconfirmedReason;

  constructor(reason: UnconfirmedReason, message: string, options?: ErrorOptions) {
    super(message, options);
    this.reason = reason;
  }
}

/** How long a channel's close waits for the broker by default (the transport passes its `closeTimeout`). */
export const DEFAULT_CHANNEL_CLOSE_TIMEOUT_MS = 5_000;

/**
 * Waits for `promise` to settle, at most `ms`: true when it did (resolved or rejected), false when
 * the time ran out first. The promise's rejection is observed either way.
 */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A channel RPC's failure as the transport's error. amqplib rejects an RPC still waiting for its
 * reply with a plain `Error` ("Channel ended, no reply will be forthcoming") when the connection
 * drops, and with the broker's channel close (its reply `code`: 404, 406…) when the broker refuses
 * it; both become a {@link TransportUnavailableError} whose `cause` is the driver's error.
 */
export function channelFailure(what: string, error: unknown): OncemqError {
  if (error instanceof OncemqError) return error;
  return new TransportUnavailableError(`RabbitMQ ${what} failed: ${errorText(error)}`, { cause: error });
}

/**
 * One confirm channel and what is known of it: whether it is still open (its delivery tags are
 * only good while it is), which publishes came back unroutable, and when to wait for its buffer.
 * Every publish is `mandatory` and resolves only when the broker confirmed it and did not return it
 * first (RabbitMQ sends `basic.return` before the `basic.ack` of an unroutable message).
 */
export class RabbitChannel {
  readonly raw: AmqpChannelLike;
  readonly #returned = new Set<string>();
  readonly #closeListeners = new Set<() => void>();
  readonly #closeTimeoutMs: number;
  #open = true;
  #drained: Promise<void> | undefined;

  /**
   * `probing`: the channel's errors are expected answers (a passive declare's 404), logged at debug.
   * `closeTimeoutMs`: the longest wait of {@link close} for the broker's close-ok.
   */
  constructor(
    raw: AmqpChannelLike,
    logger: Logger,
    label: string,
    probing = false,
    closeTimeoutMs = DEFAULT_CHANNEL_CLOSE_TIMEOUT_MS,
  ) {
    this.raw = raw;
    this.#closeTimeoutMs = closeTimeoutMs;
    raw.on('error', (error) => {
      const fields = { channel: label, error: errorText(error) };
      if (probing) logger.debug('oncemq: RabbitMQ channel closed by a check', fields);
      else logger.warn('oncemq: RabbitMQ channel error', fields);
    });
    raw.on('return', (message: AmqpMessageLike) => {
      const id = message.properties.messageId;
      if (id !== undefined) this.#returned.add(id);
    });
    raw.on('close', () => {
      this.#markClosed();
    });
  }

  /** False once the channel closed: its delivery tags are dead, settling them is dropped. */
  get open(): boolean {
    return this.#open;
  }

  /** Calls `listener` once when the channel closes (at once when it already is). */
  onClose(listener: () => void): void {
    if (!this.#open) listener();
    else this.#closeListeners.add(listener);
  }

  /** Publishes with `mandatory` and resolves once the broker confirmed the stored copy. */
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: AmqpPublishOptions & { messageId: string },
  ): Promise<void> {
    // Behind a full write buffer, wait for it to drain; otherwise publish in this turn, no await.
    const drained = this.#drained;
    if (drained !== undefined) return drained.then(() => this.#send(exchange, routingKey, content, options));
    return this.#send(exchange, routingKey, content, options);
  }

  #send(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: AmqpPublishOptions & { messageId: string },
  ): Promise<void> {
    if (!this.#open) return Promise.reject(new UnconfirmedPublishError('lost', 'the channel is closed'));
    const id = options.messageId;
    return new Promise<void>((resolve, reject) => {
      const settle = (error: unknown): void => {
        const returned = this.#returned.delete(id);
        if (error !== null && error !== undefined) {
          const text = errorText(error);
          const reason = /nack/i.test(text) ? 'nacked' : 'lost';
          reject(new UnconfirmedPublishError(reason, `publish not confirmed: ${text}`, { cause: error }));
        } else if (returned) {
          reject(
            new UnconfirmedPublishError(
              'unroutable',
              `no queue is bound to ${JSON.stringify(routingKey)} on exchange ${JSON.stringify(exchange)}: the message was returned, not stored`,
            ),
          );
        } else resolve();
      };
      let buffered: boolean;
      try {
        buffered = this.raw.publish(
          exchange,
          routingKey,
          content,
          // Not `{ ...options, mandatory: true }`: a spread followed by properties is V8's slow path.
          Object.assign({}, options, MANDATORY_PERSISTENT),
          settle,
        );
      } catch (error) {
        reject(new UnconfirmedPublishError('lost', `publish failed: ${errorText(error)}`, { cause: error }));
        return;
      }
      if (!buffered) this.#waitForDrain();
    });
  }

  #waitForDrain(): void {
    this.#drained ??= new Promise<void>((resolve) => {
      const done = (): void => {
        this.raw.removeListener('drain', done);
        this.#closeListeners.delete(done);
        this.#drained = undefined;
        resolve();
      };
      this.raw.once('drain', done);
      this.onClose(done);
    });
  }

  /**
   * Runs one RPC of the channel (`prefetch`, `consume`, `get`, `checkQueue`…) and answers its
   * reply; a failure is {@link channelFailure}'s, never the driver's raw error.
   */
  async call<T>(what: string, rpc: (raw: AmqpChannelLike) => Promise<T>): Promise<T> {
    try {
      return await rpc(this.raw);
    } catch (error) {
      throw channelFailure(what, error);
    }
  }

  /** Acks a delivery of this channel; false (and nothing sent) when the channel is gone. */
  ack(message: AmqpMessageLike): boolean {
    if (!this.#open) return false;
    try {
      this.raw.ack(message);
      return true;
    } catch {
      return false;
    }
  }

  /** Hands a delivery back to its queue; false (and nothing sent) when the channel is gone. */
  requeue(message: AmqpMessageLike): boolean {
    if (!this.#open) return false;
    try {
      this.raw.nack(message, false, true);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Closes the channel; resolves once it is closed, however that happens, or after the close
   * timeout. amqplib's `close()` only settles on the broker's `channel.close-ok`: when the
   * connection drops after the close was sent and before that reply, it never settles, though the
   * channel is closed with the connection (the channel's `close` event ends the wait then); when the
   * broker or the network stops answering, nothing comes at all. Past the timeout the channel sends
   * nothing more (amqplib refuses every send once the close is sent) and counts as closed here; its
   * connection's close, bounded the same way, ends it for good.
   */
  async close(): Promise<void> {
    if (!this.#open) return;
    const closed = new Promise<void>((resolve) => this.onClose(resolve));
    const closing = this.raw.close().catch(() => {
      // already closing or closed with its connection
    });
    if (!(await settlesWithin(Promise.race([closing, closed]), this.#closeTimeoutMs))) {
      this.#markClosed();
    }
  }

  /** The channel is gone for this side: its tags are dead, its waiters released. */
  #markClosed(): void {
    if (!this.#open) return;
    this.#open = false;
    for (const listener of [...this.#closeListeners]) listener();
    this.#closeListeners.clear();
  }
}
