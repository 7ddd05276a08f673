/**
 * What the transport suite needs from one broker: the oncemq transport, and the broker's raw client
 * doing the same flow by hand. One entry per broker (bench/transports/<name>.ts); everything else is
 * shared, so adding a broker is one file and one line in the suite's list.
 */
import { connect } from 'node:net';
import type { Transport } from '../src/transport/transport.js';
import type { RawMessage } from './points-db.js';

/** How a raw consumer is driven: the same numbers the oncemq row subscribes with. */
export interface RawConsumeOptions {
  /** Most messages unacked at once (prefetch, max ack pending, entries read). */
  readonly concurrency: number;
  /** Messages handed to `work` at once (1: one by one). */
  readonly batchSize: number;
}

/** The raw client of a broker on names of its own: one topic, one group, one way of consuming. */
export interface RawClient {
  /** Stores the bodies in the topic; resolves once the broker confirmed every one. */
  publish(bodies: readonly string[]): Promise<void>;
  /**
   * Consumes the group's messages: `work` gets `batchSize` at once (what arrived together), each
   * message is acked after `work` resolved, then `acked` counts them. A `work` that rejects stops
   * the drain with `failed`.
   */
  consume(
    work: (messages: readonly RawMessage[]) => Promise<void>,
    acked: (count: number) => void,
    failed: (error: unknown) => void,
  ): Promise<{ stop(): Promise<void> }>;
  /** Closes the client and removes what it created at the broker. */
  close(): Promise<void>;
}

/** The oncemq transport of a broker on names of its own. */
export interface OpenTransport {
  readonly transport: Transport;
  /** After the transport closed: removes what it created at the broker. */
  readonly cleanup: () => Promise<void>;
}

export interface TransportTarget {
  readonly name: string;
  /** The broker's URL, checked for a listening port before the rows run (none: nothing to reach). */
  readonly url?: () => string;
  /** `scope` is unique to the run: every name at the broker starts with it. */
  open(scope: string): Promise<OpenTransport>;
  raw(scope: string, options: RawConsumeOptions): Promise<RawClient>;
  /** Settings that differ from the defaults of the transport, said in the table's note. */
  readonly note?: string;
}

/** Runs `send(i)` for i below `count`, at most `window` at once. */
export async function inWindows(
  count: number,
  window: number,
  send: (i: number) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await send(next++);
  };
  await Promise.all(Array.from({ length: Math.min(window, count) }, worker));
}

/** Most publishes in flight while a drain's messages are stored. */
export const PUBLISH_WINDOW = 256;

/** Whether something listens at the URL's host and port. */
export function reachable(url: string, timeoutMs = 1500): Promise<boolean> {
  const parsed = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: parsed.hostname.replace(/^\[|\]$/g, ''), port: Number(parsed.port) });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
