import { TransportUnavailableError } from '../../core/errors.js';
import { SILENT_LOGGER, type Logger } from '../../core/logger.js';
import type { NatsConnectionLike } from './nats-driver.js';

/** The server a status event names, when it names one. */
function statusServer(status: unknown): string | undefined {
  const server = (status as { server?: unknown }).server;
  return typeof server === 'string' ? server : undefined;
}

/**
 * Follows a connection's status. Each loss of the connection ends a session: deliveries received
 * in an earlier session are stale — the transport drops their settles, and the server redelivers
 * them after the ack wait (the same copy, absorbed by the ledger) — and pulls of that session stop.
 */
export class NatsSession {
  /** Times the connection was lost so far; a delivery is stale when this moved since it arrived. */
  generation = 0;
  #connected = true;
  #waiters: (() => void)[] = [];
  readonly #listeners = new Set<() => void>();
  readonly #loop: Promise<void>;

  readonly #logger: Logger;

  /** `logger` hears of each loss of the connection and each reconnection. */
  constructor(connection: NatsConnectionLike, logger: Logger = SILENT_LOGGER) {
    this.#logger = logger;
    this.#loop = this.#follow(connection);
  }

  get connected(): boolean {
    return this.#connected;
  }

  async #follow(connection: NatsConnectionLike): Promise<void> {
    for await (const status of connection.status()) {
      if (status.type === 'disconnect') {
        this.#logger.warn('oncemq: NATS connection lost; reconnecting', { server: statusServer(status) });
        this.generation++;
        this.#connected = false;
        for (const listener of this.#listeners) listener();
      } else if (status.type === 'reconnect') {
        this.#logger.warn('oncemq: NATS connection back', { server: statusServer(status) });
        this.#connected = true;
        this.#wake();
      } else if (status.type === 'close') {
        break;
      }
    }
    this.#connected = false;
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  /** Calls `listener` whenever the connection is lost; returns the function that removes it. */
  onLoss(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Resolves once the connection is up (at once when it is), or when the connection closes. */
  whenConnected(): Promise<void> {
    if (this.#connected) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /**
   * Waits up to `limitMs` for the connection; rejects when it is still down. A request sent while
   * the client waits to reconnect is lost (it times out even when the connection comes back), so
   * every request waits for the connection first.
   */
  async ready(limitMs: number): Promise<void> {
    if (this.#connected) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, limitMs)));
    await Promise.race([this.whenConnected(), late]);
    clearTimeout(timer);
    if (!this.connected) {
      throw new TransportUnavailableError(`the NATS connection is down (waited ${limitMs}ms for it)`);
    }
  }

  /** Resolves when the status stream ends (the connection closed). */
  ended(): Promise<void> {
    return this.#loop;
  }
}
