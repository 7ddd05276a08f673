import { isThenable } from '../../core/thenable.js';

/**
 * Runs the caller's work inside an open transaction: `finish` with its value (at once when the work is
 * synchronous), `rollback` and rethrow when it throws or rejects.
 */
export function settle<W, R>(
  run: () => W | Promise<W>,
  finish: (out: W) => R,
  rollback: () => void,
): R | Promise<R> {
  const abort = (error: unknown): never => {
    rollback();
    throw error;
  };
  let out: W | Promise<W>;
  try {
    out = run();
  } catch (error) {
    return abort(error);
  }
  return isThenable(out) ? out.then(finish, abort) : finish(out);
}

/**
 * Gives one connection to one operation at a time. A synchronous operation runs at once when the
 * connection is free, without waiting a turn of the event loop; an asynchronous one (a transaction
 * whose handler awaits) holds the connection until it settles, and the others queue behind it.
 */
export class ConnectionQueue {
  #busy = false;
  readonly #waiters: (() => void)[] = [];

  run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (!this.#busy) return this.#start(fn);
    return new Promise<void>((resolve) => this.#waiters.push(resolve)).then(() => this.#start(fn));
  }

  /**
   * Runs `fn` at once; whatever it throws or rejects with reaches the caller unchanged. Not an async
   * function: a synchronous operation (most claims) costs one settled promise, no frame.
   */
  #start<T>(fn: () => T | Promise<T>): Promise<T> {
    this.#busy = true;
    let value: T | Promise<T>;
    try {
      value = fn();
    } catch (error) {
      this.#next();
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- what was thrown, as an async function would
      return Promise.reject(error);
    }
    if (!isThenable(value)) {
      this.#next();
      return Promise.resolve(value);
    }
    return Promise.resolve(value).then(
      (settled) => {
        this.#next();
        return settled;
      },
      (error: unknown) => {
        this.#next();
        throw error;
      },
    );
  }

  #next(): void {
    const waiter = this.#waiters.shift();
    if (waiter === undefined) this.#busy = false;
    else waiter();
  }
}
