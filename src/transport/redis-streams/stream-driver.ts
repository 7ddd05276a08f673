import { ConfigError, TransportUnavailableError } from '../../core/errors.js';
import {
  fromIoredisStreams,
  fromNodeRedisStreams,
  type IoredisStreamsClientLike,
  type NodeRedisStreamsClientLike,
  type StreamConnection,
} from './stream-connection.js';

function missingModule(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
}

interface NodeRedisModule {
  createClient(options: { url: string }): NodeRedisStreamsClientLike;
}

interface IoredisModule {
  Redis: new (
    url: string,
    options: { lazyConnect: boolean },
  ) => IoredisStreamsClientLike & {
    connect(): Promise<void>;
  };
}

/**
 * Connects to `url` with node-redis (the maintained client) when it is installed, else ioredis;
 * neither is a dependency of oncemq: the one found is loaded here, on first use.
 */
export async function openStreamConnection(url: string): Promise<StreamConnection> {
  const fail = (error: unknown): never => {
    throw new TransportUnavailableError(`cannot connect to Redis at ${url}: ${(error as Error).message}`, {
      cause: error,
    });
  };
  let nodeRedis: NodeRedisModule | undefined;
  try {
    const module: unknown = await import('redis');
    nodeRedis = module as NodeRedisModule;
  } catch (error) {
    if (!missingModule(error)) throw error;
  }
  if (nodeRedis !== undefined) {
    const client = nodeRedis.createClient({ url });
    client.on('error', () => undefined);
    await client.connect().catch(fail);
    return fromNodeRedisStreams(client);
  }
  let ioredis: IoredisModule;
  try {
    const module: unknown = await import('ioredis');
    ioredis = module as IoredisModule;
  } catch (error) {
    if (!missingModule(error)) throw error;
    throw new ConfigError(
      'client',
      'the redis-streams transport needs a Redis client: npm install redis (or ioredis)',
      { cause: error },
    );
  }
  const client = new ioredis.Redis(url, { lazyConnect: true });
  client.on('error', () => undefined);
  await client.connect().catch(fail);
  return fromIoredisStreams(client);
}
