import { ConfigError, TransportUnavailableError } from '../../core/errors.js';
import { redactUrl, unreachableCause, unreachableMessage } from '../../core/unreachable.js';
import type { CommandArg, StreamConnection } from './redis-streams-connection.js';

type Listener = (...args: unknown[]) => void;

/** The part of a node-redis v5+ client (`createClient()`) the stream transport calls. */
export interface NodeRedisStreamsClientLike {
  /** node-redis `sendCommand(args, { typeMapping })`: one command as its words. */
  sendCommand(
    args: readonly (string | Buffer)[],
    options?: { typeMapping?: Record<number, unknown> },
  ): Promise<unknown>;
  /** node-redis `duplicate()`: a new client with the same settings, not yet connected. */
  duplicate(): NodeRedisStreamsClientLike;
  /** node-redis `connect()`. */
  connect(): Promise<unknown>;
  /** node-redis `destroy()`: closes the connection at once. */
  destroy(): void;
  /** Listens to a client event (`error`, `reconnecting`, `end`). */
  on(event: string, listener: Listener): unknown;
  /** Stops listening to a client event. */
  off(event: string, listener: Listener): unknown;
}

/** The part of an ioredis v5+ client (`new Redis()`) the stream transport calls. */
export interface IoredisStreamsClientLike {
  /** ioredis `call(command, ...args)`: one command, bulk replies as text. */
  call(command: string, ...args: (string | Buffer)[]): Promise<unknown>;
  /** ioredis `callBuffer(command, ...args)`: one command, bulk replies as bytes. */
  callBuffer(command: string, ...args: (string | Buffer)[]): Promise<unknown>;
  /** ioredis `duplicate()`: a new connection with the same settings. */
  duplicate(): IoredisStreamsClientLike;
  /** ioredis `disconnect()`: closes the connection at once. */
  disconnect(): void;
  /** Listens to a client event (`error`, `reconnecting`, `end`). */
  on(event: string, listener: Listener): unknown;
  /** Stops listening to a client event. */
  off(event: string, listener: Listener): unknown;
}

/** What the stream transport accepts as its client. */
export type StreamClientInput = StreamConnection | NodeRedisStreamsClientLike | IoredisStreamsClientLike;

/** RESP's blob-string type (`$`), whose replies node-redis maps to `Buffer` on request. */
const RESP_BLOB_STRING = 36;
const BYTES_MAPPING = Object.freeze({ typeMapping: { [RESP_BLOB_STRING]: Buffer } });

function toBuffer(arg: CommandArg): string | Buffer {
  if (typeof arg === 'string' || Buffer.isBuffer(arg)) return arg;
  return Buffer.from(arg.buffer, arg.byteOffset, arg.byteLength);
}

/**
 * Both clients announce a lost connection with `reconnecting` (before each attempt to reconnect) and
 * `end` (when they give up or are closed).
 */
function lostEvents(client: {
  on: NodeRedisStreamsClientLike['on'];
  off: NodeRedisStreamsClientLike['off'];
}) {
  return (listener: () => void): (() => void) => {
    const fire: Listener = () => {
      listener();
    };
    client.on('reconnecting', fire);
    client.on('end', fire);
    return () => {
      client.off('reconnecting', fire);
      client.off('end', fire);
    };
  };
}

/** Adapts a node-redis v5+ client: `sendCommand(args)`, bytes through a `Buffer` type mapping. */
export function fromNodeRedisStreams(client: NodeRedisStreamsClientLike): StreamConnection {
  return {
    client: 'node-redis',
    send: (args, options) =>
      client.sendCommand(args.map(toBuffer), options?.bytes === true ? BYTES_MAPPING : undefined),
    async duplicate() {
      const copy = client.duplicate();
      // Without a listener, a connection error is thrown from the emitter and ends the process.
      copy.on('error', () => undefined);
      await copy.connect();
      return fromNodeRedisStreams(copy);
    },
    onLost: lostEvents(client),
    close() {
      client.destroy();
      return Promise.resolve();
    },
  };
}

/**
 * Adapts an ioredis v5+ client: `call` for text replies, `callBuffer` for bytes. Its default
 * `autoResendUnfulfilledCommands: true` is kept: with `false`, ioredis 6.0.0 leaves a command that
 * was in flight when the connection dropped unsettled for ever (redis/ioredis#2193).
 */
export function fromIoredisStreams(client: IoredisStreamsClientLike): StreamConnection {
  return {
    client: 'ioredis',
    send(args, options) {
      const [command = '', ...rest] = args.map(toBuffer);
      const name = command.toString();
      return options?.bytes === true ? client.callBuffer(name, ...rest) : client.call(name, ...rest);
    },
    duplicate() {
      const copy = client.duplicate();
      copy.on('error', () => undefined);
      return Promise.resolve(fromIoredisStreams(copy));
    },
    onLost: lostEvents(client),
    close() {
      client.disconnect();
      return Promise.resolve();
    },
  };
}

function has(value: object, ...methods: string[]): boolean {
  return methods.every((name) => typeof (value as Record<string, unknown>)[name] === 'function');
}

/**
 * Picks the adapter by what the client can do: a {@link StreamConnection} is used as is; node-redis is
 * recognised by `sendCommand` + `duplicate` + `connect`, ioredis by `callBuffer` + `duplicate`. Anything else is
 * refused at start-up rather than guessed at.
 */
export function toStreamConnection(input: StreamClientInput, field = 'client'): StreamConnection {
  if (typeof input !== 'object' || (input as unknown) === null) {
    throw new ConfigError(field, 'expected a node-redis client, an ioredis client or a StreamConnection');
  }
  if (has(input, 'send', 'duplicate', 'onLost', 'close')) return input as StreamConnection;
  // ioredis has a sendCommand too (of another shape): callBuffer tells it apart.
  if (has(input, 'call', 'callBuffer', 'duplicate', 'on')) {
    return fromIoredisStreams(input as IoredisStreamsClientLike);
  }
  if (has(input, 'sendCommand', 'duplicate', 'connect', 'on')) {
    return fromNodeRedisStreams(input as NodeRedisStreamsClientLike);
  }
  throw new ConfigError(
    field,
    'not a node-redis client (sendCommand, duplicate) nor an ioredis client (call, callBuffer, duplicate)',
  );
}

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
