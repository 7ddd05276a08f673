import type { Msg, MsgHdrs } from '@nats-io/transport-node';
import { newInbox } from './nats-confirms.js';
import type { DeliveredMessage } from './nats-delivery.js';
import type { NatsConnectionLike, NatsSubscriptionLike } from './nats-driver.js';

/** What a pull tells its subscription. */
export interface PullEvents {
  /** A message came; `holdsSlot` is false when it came beyond what was asked (it goes back). */
  readonly message: (msg: PulledMessage, holdsSlot: boolean) => void;
  /** Slots asked for that no message will fill any more (a request expired, or the pull ended). */
  readonly unfilled: (count: number) => void;
}

/** Status codes of a pull request's replies. */
const HEARTBEAT = 100;
const REQUEST_TIMEOUT = 408;
const CONFLICT = 409;
const PENDING_MESSAGES = 'Nats-Pending-Messages';

/**
 * One source's pull for one session: one inbox subscription, and on it pull requests
 * (`$JS.API.CONSUMER.MSG.NEXT`) each for as many messages as slots were taken, so no message waits
 * in a client buffer while its ack wait runs. It keeps count of the messages asked for and not yet
 * come: a message takes one, an expired request (408) gives back what it did not bring. The server
 * sends heartbeats while a request waits; no word for two heartbeats while messages are asked for,
 * a conflict without a count (409: the consumer deleted, …) or a failed subscription ends the pull
 * with an error. `fetch()` of nats.js does the same per request with a subscription, timers and an
 * iterator of its own each time, which cost a busy consumer more than the requests themselves.
 */
export class NatsPull {
  /** Messages asked for and not yet come (nor expired). */
  outstanding = 0;
  /** The last request expired before it was full: the source has fewer messages than asked for. */
  idle: boolean;
  /** Why the pull ended; undefined while it runs, or when it was stopped. */
  failure: Error | undefined;
  #running = true;
  readonly #connection: NatsConnectionLike;
  readonly #subject: string;
  readonly #inbox: string;
  readonly #expiresNs: number;
  readonly #heartbeatMs: number;
  readonly #events: PullEvents;
  readonly #subscription: NatsSubscriptionLike;
  readonly #monitor: NodeJS.Timeout;
  #heardAt = Date.now();
  #wake: () => void = () => undefined;

  constructor(
    connection: NatsConnectionLike,
    source: { readonly stream: string; readonly consumer: string },
    options: { readonly expiresMs: number; readonly idle: boolean },
    events: PullEvents,
  ) {
    this.#connection = connection;
    this.#subject = `$JS.API.CONSUMER.MSG.NEXT.${source.stream}.${source.consumer}`;
    this.#inbox = newInbox(connection);
    this.#expiresNs = options.expiresMs * 1_000_000;
    this.#heartbeatMs = heartbeatOf(options.expiresMs);
    this.idle = options.idle;
    this.#events = events;
    this.#subscription = connection.subscribe(this.#inbox, {
      callback: (error, msg) => {
        if (error !== null) this.#end(error);
        else if (msg.subject === this.#inbox) this.#status(msg.headers);
        else this.#message(msg);
      },
    });
    this.#monitor = setInterval(() => {
      if (this.outstanding > 0 && Date.now() - this.#heardAt > 2 * this.#heartbeatMs) {
        this.#end(new Error(`no heartbeat from the server for ${2 * this.#heartbeatMs}ms`));
      }
    }, this.#heartbeatMs);
    this.#monitor.unref();
  }

  /** Read through a method: the loop checks it again after every wait. */
  isRunning(): boolean {
    return this.#running;
  }

  /**
   * Asks the server for `count` more messages; `expiresMs` shortens this request's life (an ordered
   * partition's pull must end before its owner may let the partition go).
   */
  request(count: number, expiresMs?: number): void {
    if (this.outstanding === 0) this.#heardAt = Date.now();
    this.outstanding += count;
    const heartbeatMs = expiresMs === undefined ? this.#heartbeatMs : heartbeatOf(expiresMs);
    this.#connection.publish(
      this.#subject,
      JSON.stringify({
        batch: count,
        expires: expiresMs === undefined ? this.#expiresNs : expiresMs * 1_000_000,
        idle_heartbeat: heartbeatMs * 1_000_000,
      }),
      { reply: this.#inbox },
    );
  }

  /** Resolves at the next message, status or end of the pull. */
  changed(): Promise<void> {
    return new Promise((resolve) => (this.#wake = resolve));
  }

  #message(msg: Msg): void {
    this.#heardAt = Date.now();
    const holdsSlot = this.outstanding > 0;
    if (holdsSlot) this.outstanding--;
    this.idle = false;
    this.#events.message(new PulledMessage(msg), holdsSlot);
    this.#wake();
  }

  #status(headers: MsgHdrs | undefined): void {
    this.#heardAt = Date.now();
    const code = headers?.code ?? 0;
    if (code === HEARTBEAT) return;
    const pending = headers?.get(PENDING_MESSAGES);
    if ((code === REQUEST_TIMEOUT || code === CONFLICT) && pending !== undefined && pending !== '') {
      const count = Math.min(this.outstanding, Number(pending));
      this.outstanding -= count;
      this.#events.unfilled(count);
      if (code === REQUEST_TIMEOUT) this.idle = true;
      else this.#end(new Error(`the pull request ended: ${code} ${headers?.description ?? ''}`));
      this.#wake();
      return;
    }
    this.#end(new Error(`the pull request ended: ${code} ${headers?.description ?? ''}`));
  }

  #end(failure: Error | undefined): void {
    if (!this.#running) return;
    this.#running = false;
    this.failure = failure;
    clearInterval(this.#monitor);
    this.#subscription.unsubscribe();
    const unfilled = this.outstanding;
    this.outstanding = 0;
    this.#events.unfilled(unfilled);
    this.#wake();
  }

  /** Ends the pull (no error): what its requests would still bring is not received. */
  stop(): void {
    this.#end(undefined);
  }
}

/** A request's idle heartbeat, as nats.js sets it for a fetch: half the expiry, between 0.5 s and 30 s. */
function heartbeatOf(expiresMs: number): number {
  return Math.min(30_000, Math.max(500, expiresMs / 2));
}

/**
 * A message a pull received, as a delivery reads it. The reply subject carries the delivery's
 * metadata: `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time ns>.<pending>`,
 * with a domain and an account hash after `$JS.ACK` on newer servers.
 */
export class PulledMessage implements DeliveredMessage {
  readonly data: Uint8Array;
  readonly headers: MsgHdrs | undefined;
  readonly reply: string;
  readonly info: { readonly stream: string; readonly deliveryCount: number };
  readonly seq: number;
  readonly time: Date;

  constructor(msg: Msg) {
    this.data = msg.data;
    this.headers = msg.headers;
    this.reply = msg.reply ?? '';
    const tokens = this.reply.split('.');
    const at = tokens.length === 9 ? 2 : 4;
    this.info = { stream: tokens[at] ?? '', deliveryCount: Number(tokens[at + 2]) };
    this.seq = Number(tokens[at + 3]);
    this.time = new Date(Math.floor(Number(tokens[at + 5]) / 1_000_000));
  }
}
