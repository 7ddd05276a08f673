/** Whether a value is a promise (or any thenable): lets synchronous work stay synchronous. */
export function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}
