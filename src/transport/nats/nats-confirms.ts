import { randomBytes } from 'node:crypto';
import { TransportUnavailableError } from '../../core/errors.js';
import type { NatsConnectionLike, NatsSubscriptionLike } from './nats-driver.js';

interface Waiting {
  readonly deadline: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/** A new inbox subject under the connection's inbox prefix (`_INBOX` unless the connection was given another). */
export function newInbox(connection: NatsConnectionLike): string {
  const prefix = (connection as { readonly options?: { readonly inboxPrefix?: string } }).options
    ?.inboxPrefix;
  return `${prefix || '_INBOX'}.${randomBytes(12).toString('hex')}`;
}

/**
 * Settles (`+ACK`, `-NAK`, `+TERM`, `+WPI`) sent as requests whose replies all come to one inbox
 * subscription of the connection, so that a lost one is known: the promise of each resolves once
 * the server answered it and rejects when no answer came within the request timeout. It is what
 * `ackAck()` and `request()` of nats.js do, without what they cost per request on a busy consumer:
 * a timer each, and an error object with its stack trace built for every request that succeeded.
 * The timeouts are swept together, a few times per timeout, so one can end up to a quarter late.
 */
export class NatsConfirms {
  readonly #connection: NatsConnectionLike;
  readonly #timeoutMs: number;
  #prefix = '';
  #subscription: NatsSubscriptionLike | undefined;
  #next = 0;
  /** In the order sent, which is the order of the deadlines. */
  readonly #waiting = new Map<number, Waiting>();
  #sweeper: NodeJS.Timeout | undefined;

  constructor(connection: NatsConnectionLike, timeoutMs: number) {
    this.#connection = connection;
    this.#timeoutMs = timeoutMs;
  }

  /** Sends `payload` to a delivery's reply subject; resolves when the server confirmed it. */
  send(subject: string, payload: Uint8Array): Promise<void> {
    if (this.#connection.isClosed()) {
      return Promise.reject(new TransportUnavailableError('the NATS connection is closed'));
    }
    this.#subscription ??= this.#subscribe();
    const token = this.#next++;
    const confirmed = new Promise<void>((resolve, reject) => {
      this.#waiting.set(token, { deadline: Date.now() + this.#timeoutMs, resolve, reject });
    });
    if (this.#sweeper === undefined) {
      this.#sweeper = setInterval(() => this.#sweep(), Math.max(10, Math.ceil(this.#timeoutMs / 4)));
      this.#sweeper.unref();
    }
    this.#connection.publish(subject, payload, { reply: `${this.#prefix}${token}` });
    return confirmed;
  }

  #subscribe(): NatsSubscriptionLike {
    this.#prefix = `${newInbox(this.#connection)}.`;
    return this.#connection.subscribe(`${this.#prefix}*`, {
      callback: (error, msg) => {
        if (error !== null) {
          this.#failAll(error.message);
          return;
        }
        const token = Number(msg.subject.slice(this.#prefix.length));
        const waiting = this.#waiting.get(token);
        if (waiting === undefined) return;
        this.#waiting.delete(token);
        // An empty reply with status 503: nothing was listening on the delivery's reply subject.
        if (msg.data.length === 0 && msg.headers?.code === 503) {
          waiting.reject(new TransportUnavailableError('no responders for the settle'));
        } else {
          waiting.resolve();
        }
      },
    });
  }

  #sweep(): void {
    const now = Date.now();
    for (const [token, waiting] of this.#waiting) {
      if (waiting.deadline > now) break;
      this.#waiting.delete(token);
      waiting.reject(new TransportUnavailableError(`not confirmed within ${this.#timeoutMs}ms`));
    }
    if (this.#waiting.size === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }

  #failAll(reason: string): void {
    for (const waiting of this.#waiting.values()) waiting.reject(new TransportUnavailableError(reason));
    this.#waiting.clear();
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
    this.#subscription = undefined;
  }

  /** Rejects what is still unconfirmed and leaves the inbox (the transport closes). */
  close(): void {
    const subscription = this.#subscription;
    this.#failAll('the NATS transport closed');
    subscription?.unsubscribe();
  }
}
