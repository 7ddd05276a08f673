import { errorText, TransportUnavailableError } from '../../core/errors.js';
import type { CommandArg, SendOptions, StreamConnection } from './redis-streams-connection.js';
import type { StreamScript } from './redis-streams-scripts.js';

/**
 * The error code of a Redis error reply (`BUSYGROUP`, `NOGROUP`, `WRONGTYPE`…), found on the error
 * or its causes; `undefined` for a connection failure or a timeout, whose command may or may not
 * have run.
 */
export function replyCode(error: unknown): string | undefined {
  for (let current = error; current instanceof Error; current = current.cause) {
    if (current instanceof TransportUnavailableError) continue;
    return /^([A-Z][A-Z_]+) /.exec(current.message)?.[1];
  }
  return undefined;
}

/**
 * One connection with a deadline on every command: a command that has not answered within the
 * timeout fails (it may still run), and every driver error comes back as a
 * {@link TransportUnavailableError} with the driver's error as its cause.
 */
export class StreamCommands {
  constructor(
    readonly connection: StreamConnection,
    readonly timeoutMs: number,
  ) {}

  send(
    args: readonly CommandArg[],
    what: string,
    options?: SendOptions & { extraMs?: number },
  ): Promise<unknown> {
    return this.#deadline(this.connection.send(args, options), what, options?.extraMs ?? 0);
  }

  script(
    script: StreamScript,
    keys: readonly string[],
    args: readonly CommandArg[],
    options?: SendOptions,
  ): Promise<unknown> {
    return this.#deadline(script.run(this.connection, keys, args, options), `the ${script.name} script`, 0);
  }

  #deadline<T>(promise: Promise<T>, what: string, extraMs: number): Promise<T> {
    const limit = this.timeoutMs + extraMs;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new TransportUnavailableError(`Redis did not answer ${what} within ${limit}ms`));
      }, limit);
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(
            new TransportUnavailableError(`Redis failed ${what}: ${errorText(error)}`, { cause: error }),
          );
        },
      );
    });
  }
}
