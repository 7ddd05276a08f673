import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { fromIoredis, fromNodeRedis, type RedisClientInput, type RedisLike } from 'oncemq/redis';

export const REDIS_SERVICE = { variable: 'ONCEMQ_REDIS_URL', defaultUrl: 'redis://127.0.0.1:6379' } as const;

export type RedisClientKind = 'node-redis' | 'ioredis';
export const REDIS_CLIENT_KINDS: readonly RedisClientKind[] = ['node-redis', 'ioredis'];

/** A connected client of one kind, its adapter, and a cleanup that deletes every key under `prefix`. */
export interface TestRedis {
  readonly kind: RedisClientKind;
  /** The raw client, as a user would pass it. */
  readonly client: RedisClientInput;
  readonly redis: RedisLike;
  /** A prefix no other test uses. */
  readonly prefix: string;
  /** FLUSHALL — only ever on a private server a fault test started (see redis-server.ts). */
  flushAllOfPrivateServer(): Promise<void>;
  /** CLIENT PAUSE ms ALL: the server answers no client for `ms` — only ever on a private server. */
  pausePrivateServer(ms: number): Promise<void>;
  /** Deletes the keys under the prefix and disconnects. */
  close(): Promise<void>;
}

/** Connects a client; pass `prefix` to join another connection's namespace. */
export async function connectRedis(
  kind: RedisClientKind,
  url: string,
  prefix = `oncemq-test-${randomUUID().slice(0, 8)}`,
): Promise<TestRedis> {
  if (kind === 'node-redis') {
    const client = createClient({ url });
    client.on('error', () => undefined);
    await client.connect();
    return {
      kind,
      client,
      redis: fromNodeRedis(client),
      prefix,
      async flushAllOfPrivateServer() {
        await client.flushAll();
      },
      async pausePrivateServer(ms) {
        await client.sendCommand(['CLIENT', 'PAUSE', String(ms), 'ALL']);
      },
      async close() {
        for await (const keys of client.scanIterator({ MATCH: `${prefix}:*`, COUNT: 500 })) {
          if (keys.length > 0) await client.del(keys);
        }
        client.destroy();
      },
    };
  }
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  await client.connect();
  return {
    kind,
    client,
    redis: fromIoredis(client),
    prefix,
    async flushAllOfPrivateServer() {
      await client.flushall();
    },
    async pausePrivateServer(ms) {
      await client.call('CLIENT', 'PAUSE', String(ms), 'ALL');
    },
    async close() {
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
        cursor = next;
        if (keys.length > 0) await client.del(...keys);
      } while (cursor !== '0');
      client.disconnect();
    },
  };
}
