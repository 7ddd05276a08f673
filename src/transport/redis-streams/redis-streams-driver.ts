import { ConfigError, TransportUnavailableError } from '../../core/errors.js';
import { redactUrl, unreachableCause, unreachableMessage } from '../../core/unreachable.js';
import {
  fromIoredisStreams,
  fromNodeRedisStreams,
  type IoredisStreamsClientLike,
  type NodeRedisStreamsClientLike,
  type StreamConnection,
} from './redis-streams-connection.js';

function missingModule(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
}

interface NodeRedisModule {
  createClient(options: {
    url: string;
    socket: { reconnectStrategy: (retries: number, cause: Error) => number | Error };
  }): NodeRedisStreamsClientLike;
}

interface IoredisModule {
  Redis: new (
    url: string,
    options: { lazyConnect: boolean; retryStrategy: (times: number) => number | null },
  ) => IoredisStreamsClientLike & { connect(): Promise<void> };
}

/** Attempts to reach Redis before the first connection gives up; once connected, reconnects never do. */
const FIRST_CONNECT_ATTEMPTS = 4;

/** Wait before reconnect attempt `n`: 50ms, doubling, at most 2s. */
const reconnectDelay = (attempt: number): number => Math.min(2000, 50 * 2 ** attempt);

async function load<T>(name: string): Promise<T | undefined> {
  try {
    const module: unknown = await import(name);
    return module as T;
  } catch (error) {
    if (missingModule(error)) return undefined;
    throw error;
  }
}

/**
 * Connects to `url` with node-redis (the maintained client) when it is installed, else ioredis;
 * neither is a dependency of oncemq: the one found is loaded here, on first use. A server that cannot
 * be reached at all fails after a few attempts; once connected, the client reconnects for ever.
 */
export async function openStreamConnection(url: string): Promise<StreamConnection> {
  const fail = (error: unknown): never => {
    const down = unreachableCause(error);
    throw new TransportUnavailableError(
      down === undefined
        ? `cannot connect to Redis at ${redactUrl(url)}: ${(error as Error).message}`
        : unreachableMessage({ server: 'Redis', url, detail: down.message }),
      { cause: error },
    );
  };
  let connected = false;
  const nodeRedis = await load<NodeRedisModule>('redis');
  if (nodeRedis !== undefined) {
    const client = nodeRedis.createClient({
      url,
      socket: {
        reconnectStrategy: (retries, cause) =>
          !connected && retries >= FIRST_CONNECT_ATTEMPTS ? cause : reconnectDelay(retries),
      },
    });
    client.on('error', () => undefined);
    client.on('ready', () => (connected = true));
    await client.connect().catch(fail);
    return fromNodeRedisStreams(client);
  }
  const ioredis = await load<IoredisModule>('ioredis');
  if (ioredis === undefined) {
    throw new ConfigError(
      'client',
      'the redis-streams transport needs a Redis client: npm install redis (or ioredis)',
    );
  }
  const client = new ioredis.Redis(url, {
    lazyConnect: true,
    retryStrategy: (times) => (!connected && times >= FIRST_CONNECT_ATTEMPTS ? null : reconnectDelay(times)),
  });
  client.on('error', () => undefined);
  client.on('ready', () => (connected = true));
  await client.connect().catch(fail);
  return fromIoredisStreams(client);
}
