import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterEach } from 'vitest';
import type { Subscription } from 'oncemq';
import {
  RedisStreamsTransport,
  type IoredisStreamsClientLike,
  type NodeRedisStreamsClientLike,
  type RedisStreamsTransportConfig,
} from 'oncemq/redis-streams';
import { TcpProxy } from 'oncemq/testing';
import { sleep } from './points.js';
import type { RedisClientKind } from './redis.js';

/** A raw client of one kind, connected as a user would (default reconnection and queueing). */
export interface RawRedis {
  readonly kind: RedisClientKind;
  readonly client: NodeRedisStreamsClientLike | IoredisStreamsClientLike;
  /** Sends one command (arguments as text or bytes), text replies. */
  send(...args: (string | Buffer)[]): Promise<unknown>;
  close(): void;
}

export async function rawRedis(kind: RedisClientKind, url: string): Promise<RawRedis> {
  if (kind === 'node-redis') {
    const client = createClient({ url });
    client.on('error', () => undefined);
    await client.connect();
    return { kind, client, send: (...args) => client.sendCommand(args), close: () => client.destroy() };
  }
  const client = new Redis(url);
  client.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    client.once('end', () => reject(new Error(`cannot connect to ${url}`)));
  });
  return {
    kind,
    client,
    send: (command, ...rest) => client.call(command as string, ...rest),
    close: () => client.disconnect(),
  };
}

/** A transport whose every connection goes through a TCP proxy, on a key prefix of its own. */
export interface ProxiedStreams {
  readonly transport: RedisStreamsTransport;
  readonly proxy: TcpProxy;
  /** The client the transport was given (through the proxy). */
  readonly client: RawRedis;
  /** A direct client, for looking at and cleaning up the keys. */
  readonly admin: RawRedis;
  readonly prefix: string;
  /** Cuts every connection of the transport and its subscriptions, and waits until they are back. */
  dropConnections(): Promise<void>;
  /** Closes the transport, deletes the prefix's keys, closes the clients and the proxy. */
  close(): Promise<void>;
}

export async function proxiedStreams(
  kind: RedisClientKind,
  url: string,
  config: Omit<RedisStreamsTransportConfig, 'client'> = {},
): Promise<ProxiedStreams> {
  const target = new URL(url);
  const proxy = await TcpProxy.start({
    targetHost: target.hostname,
    targetPort: Number(target.port || 6379),
  });
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  const client = await rawRedis(kind, proxied.toString());
  const admin = await rawRedis(kind, url);
  const prefix = `oncemq-test-${randomUUID().slice(0, 8)}`;
  const transport = new RedisStreamsTransport({ prefix, ...config, client: client.client });
  return {
    transport,
    proxy,
    client,
    admin,
    prefix,
    async dropConnections() {
      const before = proxy.connections;
      proxy.dropConnections();
      const deadline = Date.now() + 10_000;
      while (proxy.connections < before && Date.now() < deadline) await sleep(10);
    },
    async close() {
      await transport.close();
      client.close();
      await deleteKeys(admin, prefix);
      admin.close();
      await proxy.close();
    },
  };
}

/** Deletes every key under `prefix`. */
export async function deleteKeys(admin: RawRedis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = (await admin.send('SCAN', cursor, 'MATCH', `${prefix}:*`, 'COUNT', '500')) as [
      string,
      string[],
    ];
    cursor = next;
    if (keys.length > 0) await admin.send('DEL', ...keys);
  } while (cursor !== '0');
}

/**
 * Transports opened by the tests of the calling describe block (`open`), closed after each test with
 * the subscriptions pushed to `subscriptions`.
 */
export function streamsEachTest(
  kind: RedisClientKind,
  url: string,
  defaults: Omit<RedisStreamsTransportConfig, 'client'> = {},
): {
  readonly subscriptions: Subscription[];
  readonly open: (config?: Omit<RedisStreamsTransportConfig, 'client'>) => Promise<ProxiedStreams>;
} {
  const opened: ProxiedStreams[] = [];
  const subscriptions: Subscription[] = [];
  afterEach(async () => {
    await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    await Promise.all(opened.splice(0).map((streams) => streams.close()));
  });
  return {
    subscriptions,
    open: async (config = {}) => {
      const streams = await proxiedStreams(kind, url, { ...defaults, ...config });
      opened.push(streams);
      return streams;
    },
  };
}

/** A promise that resolves when `open()` is called: holds a handler until the test lets it go. */
export function gate(): { readonly opened: Promise<void>; readonly open: () => void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open: () => open() };
}

/**
 * Publishes one message per key to `topic` and makes them pending for `consumer` of `group`, as a
 * member that read them and died before settling would leave them. Returns the topic's stream key.
 */
export async function leavePending(
  streams: ProxiedStreams,
  group: string,
  consumer: string,
  topic: string,
  keys: readonly string[],
): Promise<string> {
  const stream = streams.transport.settings.keys.topic(topic);
  for (const key of keys) await streams.transport.publish({ topic, key, body: {} });
  await streams.admin.send('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM');
  await streams.admin.send('XREADGROUP', 'GROUP', group, consumer, 'COUNT', '100', 'STREAMS', stream, '>');
  return stream;
}
