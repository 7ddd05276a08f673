import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach } from 'vitest';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { NatsTransport, type NatsTransportConfig } from 'oncemq/nats';
import type { TransportFactory } from 'oncemq/conformance';
import { TcpProxy } from 'oncemq/testing';
import { waitUntil } from './local-points.js';
import type { ServiceSpec } from './services.js';

export const NATS_SERVICE: ServiceSpec = { variable: 'ONCEMQ_NATS_URL', defaultUrl: 'nats://127.0.0.1:4222' };

/** Settings that keep the tests quick: short pulls, a short failure backoff. */
export const QUICK_NATS: NatsTransportConfig = Object.freeze({
  pullExpires: '1s',
  failureBackoff: '200ms',
  requestTimeout: '2s',
});

/** Stream and subject prefixes of one test: nothing it creates is seen by another. */
export function natsNamespace(): { streamPrefix: string; subjectPrefix: string } {
  const id = randomUUID().slice(0, 8);
  return { streamPrefix: `T${id}`, subjectPrefix: `t${id}` };
}

export async function directConnection(url: string): Promise<NatsConnection> {
  return connect({ servers: url });
}

/** The server's `max_payload`: the largest message (headers and body) it takes. */
export async function serverMaxPayload(url: string): Promise<number> {
  const connection = await directConnection(url);
  try {
    const max = connection.info?.max_payload;
    if (max === undefined) throw new Error(`the NATS server at ${url} did not say its max_payload`);
    return max;
  } finally {
    await connection.close();
  }
}

/** Deletes every stream whose name starts with `prefix` (with their consumers), through a direct connection. */
export async function deleteStreams(url: string, prefix: string): Promise<void> {
  const connection = await directConnection(url);
  try {
    const jsm = await jetstreamManager(connection);
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(prefix)) await jsm.streams.delete(name);
    }
  } finally {
    await connection.close();
  }
}

/** A NATS transport reached through a {@link TcpProxy}, and everything needed to break and clean it. */
export interface NatsUnderTest extends Awaited<ReturnType<TransportFactory>> {
  readonly transport: NatsTransport;
  readonly proxy: TcpProxy;
  readonly streamPrefix: string;
  readonly subjectPrefix: string;
  /** Cuts the connection and waits until the transport saw it go (its deliveries in hand are stale). */
  readonly dropConnections: () => Promise<void>;
  /** Closes the proxy and deletes the streams (run after the transport is closed). */
  readonly cleanup: () => Promise<void>;
}

/** A fresh transport in its own namespace, its connection through a proxy. */
export async function natsUnderTest(url: string, config: NatsTransportConfig = {}): Promise<NatsUnderTest> {
  const target = new URL(url);
  const proxy = await TcpProxy.start({
    targetHost: target.hostname,
    targetPort: Number(target.port || 4222),
  });
  const names = natsNamespace();
  const transport = new NatsTransport({
    ...QUICK_NATS,
    ...names,
    servers: `nats://127.0.0.1:${proxy.port}`,
    ...config,
  });
  return {
    transport,
    proxy,
    ...names,
    dropConnections: async () => {
      const before = transport.connectionLosses;
      proxy.dropConnections();
      await waitUntil(() => transport.connectionLosses > before, 'the transport to see the connection lost');
    },
    cleanup: async () => {
      await proxy.close();
      await deleteStreams(url, names.streamPrefix);
    },
  };
}

/** A JetStream manager on a direct connection (not through the proxy), for what a test inspects or breaks. */
export async function adminOf(url: string): Promise<{ jsm: JetStreamManager; close: () => Promise<void> }> {
  const connection = await directConnection(url);
  const jsm = await jetstreamManager(connection);
  return { jsm, close: () => connection.close() };
}

/** What each case of a NATS describe block gets: its own transport, an admin manager, extra transports closed after it. */
export interface NatsTestBed {
  /** A fresh transport in its own namespace, through a proxy; closed and cleaned after the test. */
  open(config?: NatsTransportConfig): Promise<NatsUnderTest>;
  /** A manager on a direct connection, for what a test inspects or breaks. */
  readonly admin: JetStreamManager;
  /** Closes `transport` after the test, before the namespace is removed. */
  track<T extends { close(): Promise<void> }>(transport: T): T;
}

/** Registers the hooks of a describe block whose cases each open a NATS transport. */
export function natsTestBed(url: string): NatsTestBed {
  let under: NatsUnderTest | undefined;
  let admin: Awaited<ReturnType<typeof adminOf>> | undefined;
  const tracked: { close(): Promise<void> }[] = [];
  beforeEach(async () => {
    admin = await adminOf(url);
  });
  afterEach(async () => {
    for (const transport of tracked.splice(0)) await transport.close();
    await under?.transport.close();
    await under?.cleanup();
    under = undefined;
    await admin?.close();
  });
  return {
    open: async (config = {}) => {
      under = await natsUnderTest(url, config);
      return under;
    },
    get admin() {
      if (admin === undefined) throw new Error('the admin connection opens before each test');
      return admin.jsm;
    },
    track: (transport) => (tracked.push(transport), transport),
  };
}
