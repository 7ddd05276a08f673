import { ConfigError, LedgerUnavailableError } from '../../core/errors.js';

/**
 * The Redis commands oncemq sends, as one explicit shape. Each client gets its own adapter
 * ({@link fromNodeRedis}, {@link fromIoredis}) that spells the options the way that client reads
 * them: an option shape one client ignores would silently turn `SET NX` into a plain `SET`
 * (the failure behind AWS Powertools #5716), so nothing here is passed through untyped.
 */
export interface RedisLike {
  /** Which client this adapter drives, for logs and error messages. */
  readonly client: string;
  /**
   * True for a Redis Cluster client: scripts then touch one key each (keys of different deliveries
   * live on different slots), so the ledger sends no multi-key batches.
   */
  readonly cluster?: boolean;
  /**
   * Where the client connects (`redis://host:port`, without a password) and whether it is connected
   * now, as far as the client tells; the ledger names them when its server cannot be reached.
   */
  readonly connection?: () => RedisConnectionState;
  /** `SET key value PX ttlMs NX`: `true` when the key was set, `false` when it already existed. */
  setNx(key: string, value: string, ttlMs: number): Promise<boolean>;
  /**
   * `SET key value PX ttlMs NX GET` (Redis 7.0+): `null` when the key was set, else the value already
   * there (left unchanged).
   */
  setNxGet(key: string, value: string, ttlMs: number): Promise<string | null>;
  /** `SET key value PX ttlMs` (unconditional). */
  setPx(key: string, value: string, ttlMs: number): Promise<void>;
  /** `GET key`: the value as text, `null` when the key does not exist. */
  get(key: string): Promise<string | null>;
  /** `DEL key`: how many keys were deleted (0 or 1). */
  del(key: string): Promise<number>;
  /** `EVALSHA`; rejects with an error whose message starts with `NOSCRIPT` when the script is not cached. */
  evalSha(sha: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** `EVAL` (also caches the script for later `EVALSHA`). */
  eval(script: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
}

/** What {@link RedisLike.connection} tells. */
export interface RedisConnectionState {
  /** `redis://host:port`, when the client says where it connects. */
  readonly url: string | undefined;
  /** The client is connected and takes commands now. */
  readonly ready: boolean;
}

/** A `redis://host:port` of a host and a port read from a client's options, when both are there. */
function hostUrl(host: unknown, port: unknown): string | undefined {
  return typeof host === 'string' && (typeof port === 'number' || typeof port === 'string')
    ? `redis://${host}:${port}`
    : undefined;
}

/** node-redis: `isReady`, and `options.url` or `options.socket`. */
function nodeRedisConnection(client: object): RedisConnectionState {
  const { isReady, options } = client as {
    isReady?: unknown;
    options?: { url?: unknown; socket?: { host?: unknown; port?: unknown } };
  };
  const url = typeof options?.url === 'string' ? options.url : undefined;
  return { url: url ?? hostUrl(options?.socket?.host, options?.socket?.port), ready: isReady === true };
}

/** ioredis: `status` (`ready` when connected), and `options.host` / `options.port`. */
function ioredisConnection(client: object): RedisConnectionState {
  const { status, options } = client as { status?: unknown; options?: { host?: unknown; port?: unknown } };
  return { url: hostUrl(options?.host, options?.port), ready: status === 'ready' };
}

/** The part of a node-redis v5/v6 client (`createClient()`, `createCluster()`) oncemq calls. */
export interface NodeRedisClientLike {
  /** node-redis `set(key, value, { condition: 'NX', expiration: { type: 'PX', value }, GET: true })`. */
  set(
    key: string,
    value: string,
    options: {
      condition?: 'NX';
      expiration: { type: 'PX'; value: number };
      GET?: true;
    },
  ): Promise<unknown>;
  /** node-redis `get(key)`. */
  get(key: string): Promise<unknown>;
  /** node-redis `del(key)`. */
  del(key: string): Promise<unknown>;
  /** node-redis `evalSha(sha1, { keys, arguments })`. */
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** node-redis `eval(script, { keys, arguments })`. */
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** node-redis `scriptLoad(script)`: caches a script for `evalSha`. */
  scriptLoad(script: string): Promise<unknown>;
}

/** The part of an ioredis v5/v6 client (`new Redis()`, `new Cluster()`) oncemq calls. */
export interface IoredisLike {
  // One overload per spelling oncemq sends: ioredis declares each token sequence separately, and a
  // single signature with optional tokens would not match its overloads.
  /* eslint-disable @typescript-eslint/unified-signatures */
  /** ioredis `set(key, value, 'PX', ms)`. */
  set(key: string, value: string, px: 'PX', milliseconds: number): Promise<unknown>;
  /** ioredis `set(key, value, 'PX', ms, 'NX')`. */
  set(key: string, value: string, px: 'PX', milliseconds: number, nx: 'NX'): Promise<unknown>;
  /** ioredis `set(key, value, 'PX', ms, 'NX', 'GET')` (Redis 7.0+). */
  set(key: string, value: string, px: 'PX', milliseconds: number, nx: 'NX', get: 'GET'): Promise<unknown>;
  /* eslint-enable @typescript-eslint/unified-signatures */
  /** ioredis `get(key)`. */
  get(key: string): Promise<unknown>;
  /** ioredis `del(key)`. */
  del(key: string): Promise<unknown>;
  /** ioredis `evalsha(sha1, numkeys, ...keys, ...args)`. */
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** ioredis `eval(script, numkeys, ...keys, ...args)`. */
  eval(script: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** ioredis `defineCommand(name, { lua, numberOfKeys })`. */
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
}

/** What a Redis-backed ledger accepts as its client. */
export type RedisClientInput = RedisLike | NodeRedisClientLike | IoredisLike;

/** A bulk-string reply as text (`null` for a nil reply), whichever client and string mapping. */
export function replyText(reply: unknown): string | null {
  if (reply === null || reply === undefined) return null;
  if (typeof reply === 'string') return reply;
  if (reply instanceof Uint8Array) return Buffer.from(reply).toString('utf8');
  throw new LedgerUnavailableError(`unexpected Redis reply of type ${typeof reply}`);
}

/** Adapts a node-redis v5+ client: options as `{ condition: 'NX', expiration: { type: 'PX', value } }`. */
export function fromNodeRedis(client: NodeRedisClientLike): RedisLike {
  return {
    client: 'node-redis',
    cluster: typeof (client as { getSlotMaster?: unknown }).getSlotMaster === 'function',
    connection: () => nodeRedisConnection(client),
    async setNx(key, value, ttlMs) {
      const reply = await client.set(key, value, {
        condition: 'NX',
        expiration: { type: 'PX', value: ttlMs },
      });
      return reply !== null;
    },
    async setNxGet(key, value, ttlMs) {
      return replyText(
        await client.set(key, value, {
          condition: 'NX',
          expiration: { type: 'PX', value: ttlMs },
          GET: true,
        }),
      );
    },
    async setPx(key, value, ttlMs) {
      await client.set(key, value, { expiration: { type: 'PX', value: ttlMs } });
    },
    async get(key) {
      return replyText(await client.get(key));
    },
    async del(key) {
      return Number(await client.del(key));
    },
    evalSha: (sha, keys, args) => client.evalSha(sha, { keys: [...keys], arguments: [...args] }),
    eval: (script, keys, args) => client.eval(script, { keys: [...keys], arguments: [...args] }),
  };
}

/** Adapts an ioredis v5+ client: options as positional tokens, `set(key, value, 'PX', ms, 'NX')`. */
export function fromIoredis(client: IoredisLike): RedisLike {
  return {
    client: 'ioredis',
    cluster: (client as { isCluster?: unknown }).isCluster === true,
    connection: () => ioredisConnection(client),
    async setNx(key, value, ttlMs) {
      return (await client.set(key, value, 'PX', ttlMs, 'NX')) !== null;
    },
    async setNxGet(key, value, ttlMs) {
      return replyText(await client.set(key, value, 'PX', ttlMs, 'NX', 'GET'));
    },
    async setPx(key, value, ttlMs) {
      await client.set(key, value, 'PX', ttlMs);
    },
    async get(key) {
      return replyText(await client.get(key));
    },
    async del(key) {
      return Number(await client.del(key));
    },
    evalSha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
  };
}

function has(value: object, ...methods: string[]): boolean {
  return methods.every((name) => typeof (value as Record<string, unknown>)[name] === 'function');
}

/**
 * Picks the adapter by what the client can do: an object that already is a {@link RedisLike} is used
 * as is; node-redis is recognised by `evalSha` + `scriptLoad`, ioredis by `evalsha` + `defineCommand`.
 * Anything else is refused at start-up rather than guessed at.
 */
export function toRedisLike(input: RedisClientInput, field = 'client'): RedisLike {
  if (typeof input !== 'object' || (input as unknown) === null) {
    throw new ConfigError(field, 'expected a node-redis client, an ioredis client or a RedisLike adapter');
  }
  if (has(input, 'setNx', 'setNxGet', 'setPx', 'get', 'del', 'evalSha', 'eval')) return input as RedisLike;
  if (has(input, 'evalSha', 'scriptLoad', 'set', 'get')) return fromNodeRedis(input as NodeRedisClientLike);
  if (has(input, 'evalsha', 'defineCommand', 'set', 'get')) return fromIoredis(input as IoredisLike);
  throw new ConfigError(
    field,
    'not a node-redis client (evalSha, scriptLoad) nor an ioredis client (evalsha, defineCommand); ' +
      'wrap other clients in a RedisLike adapter',
  );
}

/**
 * Bounds Redis calls by a deadline without a timer per call: the pending calls sit in a list, oldest
 * first, that one interval sweeps every quarter of the timeout (so a call fails after 1 to 1.25 times
 * `timeoutMs`). Every call has the same timeout, so the list is in deadline order and a sweep stops at
 * the first call still in time; a call that answers unlinks itself. A timer per call (create, race,
 * clear) cost about a twentieth of a one-command claim, and a `Set` of pending calls a sixth of the
 * ledger's own work. The interval runs only while calls are pending and never keeps the process alive.
 */
export class CallDeadlines {
  #oldest: PendingCall | undefined;
  #newest: PendingCall | undefined;
  readonly #tickMs: number;
  #timer: NodeJS.Timeout | undefined;
  /** A failure of calls past their deadline is queued for after this turn's I/O. */
  #expiring = false;

  constructor(readonly timeoutMs: number) {
    this.#tickMs = Math.max(1, Math.ceil(timeoutMs / 4));
  }

  /** Settles like `promise`, or rejects with LedgerUnavailableError once the deadline passed (the command may still run). */
  run<T>(promise: Promise<T>, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: PendingCall = {
        deadline: performance.now() + this.timeoutMs,
        what,
        reject,
        older: this.#newest,
        newer: undefined,
      };
      if (this.#newest === undefined) this.#oldest = call;
      else this.#newest.newer = call;
      this.#newest = call;
      if (this.#timer === undefined) {
        this.#timer = setInterval(this.#sweep, this.#tickMs);
        this.#timer.unref();
      }
      promise.then(
        (value) => {
          this.#unlink(call);
          resolve(value);
        },
        (error: unknown) => {
          this.#unlink(call);
          reject(
            error instanceof Error
              ? error
              : new LedgerUnavailableError(`Redis failed ${what}: ${String(error)}`),
          );
        },
      );
    });
  }

  #unlink(call: PendingCall): void {
    if (call.older === undefined) {
      if (this.#oldest !== call) return; // swept already
      this.#oldest = call.newer;
    } else call.older.newer = call.newer;
    if (call.newer === undefined) this.#newest = call.older;
    else call.newer.older = call.older;
    call.older = call.newer = undefined;
  }

  /**
   * Runs on the interval, in the event loop's timers phase: when a call is past its deadline, its
   * failure waits for this turn's I/O (`setImmediate` runs after it), so an answer that arrived while
   * the loop was busy (a long GC, a CPU-bound handler) is read before its call is failed for lateness.
   */
  readonly #sweep = (): void => {
    const oldest = this.#oldest;
    if (oldest === undefined) this.#stop();
    else if (oldest.deadline <= performance.now() && !this.#expiring) {
      this.#expiring = true;
      setImmediate(this.#expire);
    }
  };

  readonly #expire = (): void => {
    this.#expiring = false;
    const now = performance.now();
    for (let call = this.#oldest; call !== undefined && call.deadline <= now; call = this.#oldest) {
      this.#unlink(call);
      call.reject(new LedgerUnavailableError(`Redis did not answer ${call.what} within ${this.timeoutMs}ms`));
    }
    if (this.#oldest === undefined) this.#stop();
  };

  #stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

interface PendingCall {
  readonly deadline: number;
  readonly what: string;
  readonly reject: (error: Error) => void;
  older: PendingCall | undefined;
  newer: PendingCall | undefined;
}
